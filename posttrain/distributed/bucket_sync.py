"""A bucketed weight sync to the Ray rollout workers: `RemoteEngine.begin_weights`.

    sync = remote_engine.begin_weights(version)   # what train/sharded/sync.push_buckets feeds
    for bucket in buckets:                        # HF name -> tensor, bounded in size
        sync.add(bucket)                          # digested, sent, staged by every worker
    sync.finish()                                 # every worker commits `version`

Each bucket is digested on the driver (weight_sync.manifest, so a worker verifies what it
installs), then sent by the collective group (one broadcast per bucket, `recv_bucket` on
each worker) or put once into the object store (`stage_weights` on each worker). A worker
installs each bucket straight into its engine's tensors (weight_sync.BucketedInstall) and
takes the version at `commit_weights`, so neither the driver nor a worker holds a second
full copy of the weights. One bucket is in flight at a time: bucket i is sent once every
worker has staged bucket i-1, which bounds the object store's share too.

Faults: a worker that dies mid-sync is dropped, as in any sync. A collective that fails
mid-sync breaks the group for good (RemoteEngine._break) and raises `SyncRestart`: the
sender gathers again and every bucket goes through the object store. A bucketed sync
reaches every alive worker and is waited for, whatever `cluster.staleness` is: no full
state exists to refresh a lagging worker from later.
"""

from __future__ import annotations

import time
from typing import Any, Mapping


class RemoteBucketedSync:
    full_copy = False

    def __init__(self, eng: Any, version: int) -> None:
        self.eng, self.version = eng, version
        self.first = True
        self.inflight: list[tuple[Any, Any]] = []  # (Worker, ref) of the bucket being staged
        self.t0 = time.perf_counter()
        self.digest_s = self.send_s = 0.0
        self.bytes = self.buckets = 0

    def add(self, bucket: Mapping[str, Any]) -> None:
        import ray
        import torch

        from posttrain.rollout.weight_sync import SyncRestart, manifest

        t0 = time.perf_counter()
        cpu = {k: v.detach().to("cpu") for k, v in bucket.items()}
        man = manifest(cpu, self.version, getattr(torch, self.eng.dtype) if self.eng.dtype else None)
        t1 = time.perf_counter()
        self._drain()
        first, self.first = self.first, False
        if self.eng.collective is not None and not all(w.alive for w in self.eng.workers):
            self.eng._break("a rollout worker died mid-sync")  # a broadcast would wait for it
            raise SyncRestart(f"weight sync v{self.version}: a worker died mid-sync; resending by object store")
        if self.eng.collective is not None:
            try:
                refs = self.eng._broadcast_bucket(cpu, self.version, man, first)
            except Exception as e:  # noqa: BLE001 - a peer died or timed out: the group is broken
                self.eng._break(f"bucket broadcast failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                raise SyncRestart(f"weight sync v{self.version}: the collective broke mid-sync") from e
            self.inflight = list(zip(self.eng.workers, refs))
        else:
            ref = ray.put(cpu)
            self.inflight = [(w, w.handle.stage_weights.remote(ref, self.version, man, first))
                             for w in self.eng._alive()]
        self.digest_s += t1 - t0
        self.send_s += time.perf_counter() - t1
        self.buckets += 1
        self.bytes += sum(t.numel() * t.element_size() for t in cpu.values())

    def _drain(self) -> None:
        """Wait until every worker staged the previous bucket (a dead one is dropped)."""
        import ray

        for w, ref in self.inflight:
            if not w.alive:
                continue
            try:
                ray.get(ref, timeout=self.eng.timeout_s)
            except Exception as e:  # noqa: BLE001 - _fail re-raises our own errors (a bad digest)
                self.eng._fail(w, e, "stage_weights")
        self.inflight = []

    def finish(self) -> dict[str, float]:
        from posttrain.distributed.faults import ClusterError

        self._drain()
        eng = self.eng
        eng.weights_version, eng._latest = self.version, None
        for w in eng._alive():
            w.pending = (self.version, w.handle.commit_weights.remote(self.version))
        installs = [eng._finish(w) for w in eng._alive()]
        eng.last_sync = {"digest_s": self.digest_s, "put_s": self.send_s, "total_s": time.perf_counter() - self.t0,
                         "install_max_s": max((i for i in installs if i is not None), default=0.0),
                         "buckets": float(self.buckets), "bytes": float(self.bytes)}
        if not eng._alive():
            raise ClusterError(eng._none_left())
        return eng.last_sync

    def abort(self) -> None:
        """Drop this sync; the workers abort theirs when the next sync's first bucket comes."""
        self.inflight = []
