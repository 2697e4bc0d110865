"""`RolloutWorker`: an actor holding one `fast` engine (runs inside Ray).

    w = ray.remote(RolloutWorker).remote(ray.put((model, tok)), "fast", engine_args, threads)
    ray.get(w.load_weights.remote(state_ref, version, manifest))   # verified install
    outs = ray.get(w.generate.remote(requests))

Weights arrive as one object-store reference shared by every worker (the driver puts the
state once; each node pulls it once), or, with `cluster.weight_sync=collective`, through a
torch.distributed broadcast from the driver (`join_group` once, then `recv_weights`); a
sharded trainer sends buckets instead (`stage_weights`/`recv_bucket`, then `commit_weights`). The engine's own `load_weights` verifies every
tensor against the trainer's manifest (rollout/weight_sync.py) and raises naming the
tensor on any mismatch, so a corrupted transfer never generates.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Mapping, Sequence

from posttrain.rollout.engine import InflightWeights
from posttrain.rollout.weight_sync import SyncReport

try:  # offers of new weights run on a thread of their own while generate runs (partial rollouts)
    import ray

    _offer_group = ray.method(concurrency_group="offer")
    CONCURRENCY_GROUPS = {"offer": 1}
except ImportError:  # imported without Ray (docs, type checks): plain methods
    def _offer_group(f: Any) -> Any:
        return f

    CONCURRENCY_GROUPS = {}


class RolloutWorker:
    def __init__(self, payload: tuple[Any, Any], engine_name: str, engine_args: dict, threads: int = 1) -> None:
        import torch

        from posttrain.rollout import make_engine

        torch.set_num_threads(threads)  # the node's other CPUs belong to its sandboxes
        model, tok = payload
        self.engine = make_engine(engine_name, model, tok, **engine_args)
        self.generated = 0
        self._offered: tuple[int, Any, Mapping[str, str]] | None = None  # newest offer not yet taken
        self._offer_lock = threading.Lock()
        if isinstance(self.engine, InflightWeights):
            self.engine.set_weight_source(self._take_offer)  # polled between decode steps

    def info(self) -> dict[str, Any]:
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "version": self.engine.weights_version}

    def load_weights(self, state: Mapping[str, Any], version: int, manifest: Mapping[str, str] | None) -> dict:
        t0 = time.perf_counter()
        rep = self.engine.load_weights(state, version, manifest) if manifest is not None \
            else self.engine.load_weights(state, version)
        out = {"version": self.engine.weights_version, "install_s": time.perf_counter() - t0}
        if isinstance(rep, SyncReport):
            out.update(copy_s=rep.copy_s, verify_s=rep.verify_s, bytes=rep.bytes, tensors=rep.tensors)
        return out

    def join_group(self, host: str, port: int, rank: int, world: int, backend: str, timeout_s: float) -> int:
        """Join the driver's weight-broadcast group (collective.py); returns once all have joined."""
        from posttrain.distributed.collective import make_group

        self._pg, self._backend = make_group(host, port, rank, world, backend, timeout_s), backend
        return rank

    def recv_weights(self, layout: list, version: int, manifest: Mapping[str, str] | None) -> dict:
        """Receive one broadcast sync and install it (verified against `manifest`)."""
        from posttrain.distributed.collective import broadcast_buffers, empty_buffers, unflatten

        t0 = time.perf_counter()
        bufs = empty_buffers(layout, "cuda" if self._backend == "nccl" else "cpu")
        broadcast_buffers(self._pg, bufs)
        recv_s = time.perf_counter() - t0
        out = self.load_weights(unflatten(layout, bufs), version, manifest)
        return {**out, "recv_s": recv_s}

    def stage_weights(self, state: Mapping[str, Any], version: int, manifest: Mapping[str, str], first: bool) -> int:
        """Install one bucket of a bucketed sync (bucket_sync.py), verified; `first` starts the
        sync (and drops an unfinished earlier one). The engine refuses to generate until commit."""
        from posttrain.rollout.weight_sync import begin_weights

        if first or getattr(self, "_sync", None) is None or self._sync.version != version:
            if getattr(self, "_sync", None) is not None:
                self._sync.abort()
            # lock=False: an actor runs one call at a time, and a sync the driver abandoned
            # must leave generate refusing (weights_version -1), not blocked on the lock
            self._sync, self._sync_t0 = begin_weights(self.engine, version, lock=False), time.perf_counter()
        self._sync.add(state, manifest)
        return len(state)

    def recv_bucket(self, layout: list, version: int, manifest: Mapping[str, str], first: bool) -> int:
        """Receive one broadcast bucket and stage it (the buffers go once it is installed)."""
        from posttrain.distributed.collective import broadcast_buffers, empty_buffers, unflatten

        bufs = empty_buffers(layout, "cuda" if self._backend == "nccl" else "cpu")
        broadcast_buffers(self._pg, bufs)
        return self.stage_weights(unflatten(layout, bufs), version, manifest, first)

    def commit_weights(self, version: int) -> dict:
        """The last bucket is in: every tensor must have come, then the engine takes `version`."""
        from posttrain.rollout.weight_sync import WeightSyncError

        sync = getattr(self, "_sync", None)
        if sync is None or sync.version != version:
            raise WeightSyncError(f"weight sync v{version}: commit without its buckets")
        self._sync = None
        rep = sync.finish()
        out = {"version": self.engine.weights_version, "install_s": time.perf_counter() - self._sync_t0}
        if isinstance(rep, SyncReport):
            out.update(copy_s=rep.copy_s, verify_s=rep.verify_s, bytes=rep.bytes, tensors=rep.tensors)
        return out

    @_offer_group
    def offer_weights(self, state: Mapping[str, Any], version: int, manifest: Mapping[str, str]) -> int:
        """Newer weights for the batch in flight (rl.partial_rollouts): runs beside `generate`
        (its own concurrency group) and only stores them; the engine installs them, verified
        against `manifest`, at its next decode step, and tags the later tokens with `version`."""
        with self._offer_lock:
            if self._offered is None or version > self._offered[0]:
                self._offered = (version, state, manifest)
        return version

    def _take_offer(self) -> tuple[int, Any, Mapping[str, str]] | None:
        with self._offer_lock:
            got, self._offered = self._offered, None
        return got

    def generate(self, requests: Sequence[Any]) -> tuple[int, list[Any], int, int]:
        """(version at the start, completions, version at the end, weights taken mid-batch);
        the driver checks the versions it got (every token also carries its own)."""
        def taken() -> int:
            return self.engine.inflight_updates() if isinstance(self.engine, InflightWeights) else 0

        v, before = self.engine.weights_version, taken()
        outs = self.engine.generate(requests)
        self.generated += len(outs)
        return v, outs, self.engine.weights_version, taken() - before
