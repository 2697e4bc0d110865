"""`RemoteEngine`: the `Engine` protocol over rollout-worker actors, with versioned sync.

    eng = RemoteEngine(workers, staleness=0)
    outs = eng.generate(requests)          # split across alive workers, in request order
    eng.load_weights(policy.state_dict(), version=step)

Weight sync: the driver digests the state (weight_sync.manifest), puts it into Ray's
object store once and asks every worker to install that reference; each worker's engine
verifies every tensor against the manifest and raises naming the tensor on a mismatch.
With `staleness=0` `load_weights` waits for every worker. With `staleness=k` it returns
at once, and a worker more than k versions behind is brought up to date (its install
waited for, or a fresh one pushed) before it is given work.

With a `collective` (collective.py, `cluster.weight_sync=collective`), the state is
broadcast over torch.distributed instead (NCCL on GPUs, gloo on CPUs); a group that loses a
member is broken for good and syncs fall back to the object store. A sharded trainer
sends its weights in buckets instead (`begin_weights`, bucket_sync.py). With a weight source
(`set_weight_source`, rl.partial_rollouts), newer weights are offered to the workers while a
batch generates, and taken between decode steps (offers.py).

Faults: a worker whose actor or node dies is dropped and its share of the batch is
resubmitted to another worker (brought up to date first); requests carry their own seeds,
so a resubmitted request samples the same way. With no worker left, `generate` raises
`ClusterError`. Limits: `weights_version` is the newest version pushed; with staleness
> 0 a completion may come from an older one (`cluster/rollout/max_lag` reports it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from posttrain.distributed.faults import ClusterError, is_lost, unwrap

log = logging.getLogger(__name__)


@dataclass
class Worker:
    name: str
    handle: Any
    version: int = 0
    alive: bool = True
    pending: tuple[int, Any] | None = None  # (version, ObjectRef of its load_weights)
    completions: int = 0
    gen_s: float = 0.0
    failures: int = 0
    refreshes: int = 0


class RemoteEngine:
    def __init__(self, workers: Sequence[tuple[str, Any]], staleness: int = 0, timeout_s: float = 600.0,
                 dtype: str | None = None, max_resubmits: int = 3, collective: Any = None) -> None:
        if staleness < 0:
            raise ValueError(f"staleness must be >= 0, got {staleness}")
        if collective is not None and staleness != 0:
            raise ValueError("cluster.weight_sync=collective needs cluster.staleness=0: a broadcast reaches every "
                             "worker at once, so no worker can be refreshed on its own")
        self.collective = collective  # a collective.Broadcaster, or None: the object store
        self.collective_broken = ""
        self.workers = [Worker(n, h) for n, h in workers]
        self.staleness, self.timeout_s, self.dtype, self.max_resubmits = staleness, timeout_s, dtype, max_resubmits
        self.weights_version = 0
        self._latest: tuple[Any, int, dict] | None = None
        self.last_sync: dict[str, float] = {}
        self.max_lag = 0
        self.resubmitted = 0
        self._source: Any = None  # set_weight_source (offers.py)
        self.offered_version = 0  # the newest version offered mid-batch
        self.counters = {"inflight_updates": 0}  # weights a worker took mid-batch, summed over workers

    # ---- weights ------------------------------------------------------------------------
    def load_weights(self, state: Mapping[str, Any], version: int) -> dict[str, float]:
        import ray
        import torch

        from posttrain.rollout.weight_sync import manifest

        t0 = time.perf_counter()
        cpu = {k: v.detach().to("cpu") for k, v in state.items()}
        man = manifest(cpu, version, getattr(torch, self.dtype) if self.dtype else None)
        t1 = time.perf_counter()
        self.weights_version = version
        if not self._broadcast(cpu, version, man):
            ref = ray.put(cpu)  # once: every worker pulls the same object
            self._latest = (ref, version, man)
            for w in self._alive():
                w.pending = (version, w.handle.load_weights.remote(ref, version, man))
        t2 = time.perf_counter()
        installs = [self._finish(w) for w in self._alive()] if self.staleness == 0 else []
        if self.collective is not None and not all(w.alive for w in self.workers):
            # a member died during this broadcast without failing it (its bytes fit the socket
            # buffers): the next collective would wait on it until the timeout
            self._break("a rollout worker died during the broadcast: "
                        + ", ".join(w.name for w in self.workers if not w.alive))
        self.last_sync = {"digest_s": t1 - t0, "put_s": t2 - t1, "total_s": time.perf_counter() - t0,
                          "install_max_s": max((i for i in installs if i is not None), default=0.0)}
        log.info("weight sync v%d: digest %.1f ms, put %.1f ms, total %.1f ms (%d workers)", version,
                 1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * self.last_sync["total_s"], len(self._alive()))
        if not self._alive():
            raise ClusterError(self._none_left())
        return self.last_sync

    def _broadcast(self, cpu: Mapping[str, Any], version: int, man: dict) -> bool:
        """Send by collective when the group is whole; False -> the caller uses the object store."""
        if self.collective is None:
            return False
        if not all(w.alive for w in self.workers):  # a collective cannot skip a dead member
            self._break("a rollout worker is gone: " + ", ".join(w.name for w in self.workers if not w.alive))
            return False
        try:
            refs = self.collective.broadcast(cpu, version, man)
        except Exception as e:  # noqa: BLE001 - a peer died or timed out mid-broadcast
            self._break(f"broadcast failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            return False
        for w, ref in zip(self.workers, refs):
            w.pending = (version, ref)
        return True

    def begin_weights(self, version: int) -> Any:
        """A sync in buckets (bucket_sync.py), for a sharded trainer: no full copy on the driver."""
        from posttrain.distributed.bucket_sync import RemoteBucketedSync

        if self.collective is not None and not all(w.alive for w in self.workers):
            self._break("a rollout worker is gone: " + ", ".join(w.name for w in self.workers if not w.alive))
        return RemoteBucketedSync(self, version)

    def _broadcast_bucket(self, cpu: Mapping[str, Any], version: int, man: dict, first: bool) -> list[Any]:
        return self.collective.broadcast(cpu, version, man, method="recv_bucket", first=first)

    def _break(self, why: str) -> None:
        log.warning("weight broadcast group broken (%s); weights go through the object store from now on", why)
        self.collective, self.collective_broken = None, why

    def _finish(self, w: Worker) -> float | None:
        """Wait for w's pending install; returns its install seconds (None if it died)."""
        import ray

        if w.pending is None:
            return 0.0
        version, ref = w.pending
        try:
            rep = ray.get(ref, timeout=self.timeout_s)
        except Exception as e:  # noqa: BLE001
            self._fail(w, e, "load_weights")
            return None
        w.pending, w.version = None, rep["version"]
        return rep["install_s"]

    def _refresh(self, w: Worker) -> None:
        """Bring w within `staleness` of the newest version before it gets work."""
        if w.pending is not None:
            self._finish(w)
        if w.alive and self._latest is not None and w.version < self.weights_version - self.staleness:
            ref, version, man = self._latest
            w.pending = (version, w.handle.load_weights.remote(ref, version, man))
            w.refreshes += 1
            self._finish(w)

    def _poll(self) -> None:
        import ray

        for w in self._alive():
            if w.pending is not None and ray.wait([w.pending[1]], timeout=0)[0]:
                self._finish(w)

    # ---- generation ---------------------------------------------------------------------
    # InflightWeights (rollout/engine.py): set_weight_source, workers take new weights mid-batch (offers.py)
    def inflight_updates(self) -> int:
        return int(self.counters["inflight_updates"])


    def set_weight_source(self, source: Any) -> None:
        """Poll `source()` -> (version, state) | None while a generate runs (None: stop)."""
        self._source = source

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        if self._source is None:
            return self._generate(requests)
        from posttrain.distributed.offers import WeightOffers

        self.offered_version = max(self.offered_version, self.weights_version)
        with WeightOffers(self, self._source):
            return self._generate(requests)

    def _generate(self, requests: Sequence[Any]) -> list[Any]:
        if not requests:
            return []
        self._poll()
        for w in self._alive():
            if w.version < self.weights_version - self.staleness:
                self._refresh(w)
        alive = self._alive()
        if not alive:
            raise ClusterError(self._none_left())
        chunks = _split(requests, len(alive))
        results: list[list[Any] | None] = [None] * len(chunks)
        jobs = [(i, w, self._submit(w, chunks[i])) for i, w in enumerate(alive) if chunks[i]]
        tries = 0
        while jobs:
            i, w, (ref, t0) = jobs.pop(0)
            outs = self._collect(w, ref, t0)
            if outs is not None:
                results[i] = outs
                continue
            tries += 1
            others = self._alive()
            if not others or tries > self.max_resubmits * len(chunks):
                raise ClusterError(self._none_left() if not others else f"generation failed after {tries} resubmits")
            nxt = min(others, key=lambda x: x.completions)
            self._refresh(nxt)
            self.resubmitted += 1
            log.warning("resubmitting %d request(s) from dead worker %s to %s", len(chunks[i]), w.name, nxt.name)
            jobs.append((i, nxt, self._submit(nxt, chunks[i])))
        return [c for r in results for c in (r or [])]

    def _submit(self, w: Worker, chunk: Sequence[Any]) -> tuple[Any, float]:
        return w.handle.generate.remote(list(chunk)), time.perf_counter()

    def _collect(self, w: Worker, ref: Any, t0: float) -> list[Any] | None:
        import ray

        try:
            version, outs, v_end, taken = ray.get(ref, timeout=self.timeout_s)
        except Exception as e:  # noqa: BLE001
            self._fail(w, e, "generate")
            return None
        w.gen_s += time.perf_counter() - t0
        w.completions += len(outs)
        w.version = max(w.version, v_end)  # it may have taken offered weights mid-batch
        self.counters["inflight_updates"] += taken
        self.max_lag = max(self.max_lag, self.weights_version - version)
        return outs

    def _fail(self, w: Worker, e: BaseException, what: str) -> None:
        import ray

        w.pending = None
        if isinstance(e, ray.exceptions.GetTimeoutError):
            w.failures += 1
            w.alive = False  # a hung worker is as good as dead for this run
            log.warning("rollout worker %s: %s did not answer within %.0fs; dropped", w.name, what, self.timeout_s)
            return
        if not is_lost(e):
            raise unwrap(e) from None  # our own error (e.g. WeightSyncError naming the tensor)
        w.failures += 1
        w.alive = False
        log.warning("rollout worker %s lost during %s: %s", w.name, what, type(e).__name__)

    def _alive(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def _none_left(self) -> str:
        return "no rollout capacity left: every rollout worker is dead (" + \
            ", ".join(w.name for w in self.workers) + ")"

    def cluster_metrics(self) -> dict[str, float]:
        out = {f"cluster/sync/{k}": v for k, v in self.last_sync.items()}
        out["cluster/sync/collective"] = float(self.collective is not None)  # 0: object store (or broken group)
        out.update({"cluster/rollout/workers_alive": len(self._alive()), "cluster/rollout/max_lag": self.max_lag,
                    "cluster/rollout/resubmitted": self.resubmitted})
        for w in self.workers:
            p = f"cluster/rollout/{w.name}"
            out.update({f"{p}/completions": w.completions, f"{p}/generate_s": w.gen_s, f"{p}/failures": w.failures,
                        f"{p}/version": w.version, f"{p}/refreshes": w.refreshes, f"{p}/alive": float(w.alive)})
        return out

    def close(self) -> None:
        import ray

        for w in self.workers:
            ray.kill(w.handle, no_restart=True)


def _split(requests: Sequence[Any], k: int) -> list[list[Any]]:
    """k contiguous chunks with about equal numbers of samples (sum of params.n)."""
    weights = [getattr(getattr(r, "params", None), "n", 1) for r in requests]
    total, out, cur, acc = sum(weights), [], [], 0
    for r, wt in zip(requests, weights):
        cur.append(r)
        acc += wt
        if acc >= total * (len(out) + 1) / k and len(out) < k - 1:
            out.append(cur)
            cur = []
    out.append(cur)
    return out + [[] for _ in range(k - len(out))]
