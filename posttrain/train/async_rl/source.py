"""The asynchronous batch source (rl.max_staleness = K >= 1): the trainer consumes batches the
producer generated up to K weight versions earlier.

    trainer (train_rl, main thread)               producer (pipeline.py, its own thread)
    issue batches start..start+K                  generate + verify batch s with version v(s)-K
    for s: next(): take batch s (consumer idle)   ... batch s+1, s+2 ... (producer idle)
           staleness check, observe
           update (corrected), sync(): publish v(s)+1
           after_update(): issue s+K+1

`train_rl` runs it like the synchronous source, with the same run directory (metrics,
trajectories, checkpoints) and the same row keys (detectors included, every log.detect_every
steps), plus: async/staleness (versions between the samples and the trainer),
async/staleness_frac/k (share of the step's samples k versions old), async/reused and
async/regenerated (in-flight batches carried over a resume, cumulative), async/stale_dropped
(batches regenerated because they were more than K old, cumulative), time/consumer_idle_s,
time/producer_idle_s and time/producer_busy_s (since the previous step), the correction's
train/offpolicy/* stats, and async/lr_scale (the update's lr multiplier, rl.stale_lr of the
mean token age: stale gradients take smaller steps). With rl.partial_rollouts also
async/token_staleness_frac/k (share of the step's completion tokens k versions old),
async/partial_frac (share of samples whose tokens span two or more versions) and
async/inflight_updates (weights the engine took between decode steps, since the previous step).
The drift guard (guard.py) reads train/offpolicy/kl.

torch's thread pool is process-wide, so while the source runs each torch op uses half of the
threads the run had, and the producer and the trainer together use all of them.

Limits: one engine and one producer; partial rollouts need an engine that declares
`inflight_weight_update` (`fast`; config_check refuses the others at load); no
rl.refill_rounds (config_check refuses it with K > 0).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import torch

from posttrain.errors import PosttrainError
from posttrain.rollout.engine import InflightWeights
from posttrain.train.async_rl.correction import correction_for
from posttrain.train.async_rl.guard import DriftGuard
from posttrain.train.async_rl.pipeline import Pipeline
from posttrain.train.async_rl.state import pipeline_state, restore
from posttrain.train.batch_source import ScoredBatch, observe, rollout_batch


def _inflight(engine: Any) -> int:
    return engine.inflight_updates() if isinstance(engine, InflightWeights) else 0


def partial_stats(trajs: list[Any], trained: int, k: int) -> dict[str, float]:
    """Token-level staleness against the version `trained` (the weights the update started from)."""
    ages: list[int] = []
    spans = 0
    for t in trajs:
        vs = [v for turn in t.turns if turn.trainable for v in (turn.token_versions or
                                                              (t.weights_version,) * len(turn.token_ids))]
        spans += len(set(vs)) > 1
        ages += [trained - v for v in vs]
    n = max(1, len(ages))
    return {"async/partial_frac": spans / max(1, len(trajs)),
            **{f"async/token_staleness_frac/{a}": sum(x == a for x in ages) / n for a in range(k + 1)}}


# rl.stale_lr: the update's lr multiplier from the mean age `a` (versions) of the tokens it trains on.
STALE_LR: dict[str, Callable[[float], float]] = {
    "inverse": lambda a: 1.0 / (1.0 + a),  # staleness-aware async SGD: a gradient a versions old, 1/(1+a) the step
    "none": lambda a: 1.0,
}


def stale_lr_scale(trajs: list[Any], version: int, rule: str) -> float:
    """STALE_LR[rule] of the mean age (against the trainer's `version`) of the tokens the update
    trains on: per token with partial rollouts, else each sample's weights_version. 1.0 exactly
    when every token is fresh, so K = 0 through this source stays the synchronous run bitwise."""
    ages = [version - v for t in trajs if not t.infra_error for turn in t.turns if turn.trainable
            for v in (turn.token_versions or (t.weights_version,) * len(turn.token_ids))]
    mean = sum(ages) / len(ages) if ages else 0.0
    return 1.0 if mean == 0 else STALE_LR[rule](mean)


class AsyncBatchSource:
    """`k`: the staleness bound (0 runs the synchronous schedule through this machinery, which
    tests compare with the synchronous source)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def start(self, st: Any) -> None:
        cfg = st.cfg.rl
        k = self.k
        self.corr = correction_for(cfg.offpolicy) if k > 0 else None
        self.guard = DriftGuard(cfg.offpolicy)
        self.threads = torch.get_num_threads()
        if k > 0:  # producer and trainer run at once: each torch op on half the cores, not 2x oversubscribed
            torch.set_num_threads(max(1, self.threads // 2))
        self.partial = bool(cfg.partial_rollouts) and k > 0
        if self.partial and not isinstance(st.engine, InflightWeights):
            raise PosttrainError(f"rl.partial_rollouts=true: the engine ({type(st.engine).__name__}) cannot take weights "
                                 "between decode steps (no set_weight_source); set rl.partial_rollouts=false")
        self.pipe = pipe = Pipeline(st, k, self.partial)
        self.floor, self.start_step = st.version, st.step  # the oldest weights this process has: the checkpoint's
        pipe.publish(st.version, st.trainer.snapshot())
        self.reused, self.regenerated = restore(pipe, st, st.async_state, self.floor)
        self.stale_dropped = 0
        self.next_issue = max([st.step - 1, *pipe.batches]) + 1
        self._issue_upto(st, st.step + k)
        self.idle0, self.busy0, self.t_prev = pipe.idle_s, pipe.busy_s, time.perf_counter()
        self.inflight0 = _inflight(st.engine)

    def _issue_upto(self, st: Any, last: int) -> None:
        cfg = st.cfg.rl
        while self.next_issue <= min(last, cfg.steps - 1):
            held = self.floor + (self.next_issue - self.start_step)  # the version the trainer holds then: one per step
            self.pipe.issue(self.next_issue, st.scheduler.next_batch(cfg.prompts_per_step),
                            max(self.floor, held - self.k), limit=held)
            self.next_issue += 1

    async def next(self, st: Any) -> ScoredBatch:
        t_wait = time.perf_counter()
        b = await self.pipe.take(st.step)
        oldest = min([b.version, *(t.weights_version for t in b.trajs)])  # per sample: an engine may lag its pin
        if st.version - oldest > self.k:  # e.g. a saved batch older than this run allows: never train on it
            self.stale_dropped += 1
            trajs, t_gen, t_ver = await self.pipe.on_engine(st.version, None, lambda: rollout_batch(st, b.tasks, b.step))
            b.trajs, b.version, b.generate_s, b.verify_s = trajs, st.version, t_gen - t_wait, t_ver - t_gen
        self.consumer_idle = time.perf_counter() - t_wait
        t_ver = time.perf_counter()
        t_gen = t_ver - b.verify_s
        groups, train = observe(st, b.trajs)
        lr_scale = stale_lr_scale(b.trajs, st.version, st.cfg.rl.stale_lr)
        return ScoredBatch(b.trajs, groups, train, t_gen - b.generate_s, t_gen, t_ver, b.version,
                           self.corr, lr_scale, {"async/lr_scale": lr_scale})

    def sync(self, st: Any) -> dict[str, float]:
        """Publish the new version; the producer installs it when a batch pinned to it comes up."""
        self.pipe.publish(st.version, st.trainer.snapshot())
        return {}

    def after_update(self, st: Any, batch: ScoredBatch, row: dict[str, float]) -> dict[str, float]:
        """Issue the next batch (after observe(step): the order the synchronous loop draws in), the
        step's async/* keys, and the drift guard's verdict (a warning, or OffPolicyDriftExceeded)."""
        pipe, k = self.pipe, self.k
        self._issue_upto(st, st.step + k + 1)
        pipe.consumed(st.step)
        n = max(1, len(batch.trajs))
        ages = [st.version - 1 - t.weights_version for t in batch.trajs]
        now = time.perf_counter()
        out = {
            "async/staleness": st.version - 1 - batch.version,
            **{f"async/staleness_frac/{a}": sum(x == a for x in ages) / n for a in range(k + 1)},
            "async/reused": self.reused, "async/regenerated": self.regenerated,
            "async/stale_dropped": self.stale_dropped, "time/consumer_idle_s": self.consumer_idle,
            "time/producer_idle_s": pipe.idle_s - self.idle0, "time/producer_busy_s": pipe.busy_s - self.busy0,
            "time/step_s": now - self.t_prev, "time/sync_frac": row["time/sync_s"] / max(1e-9, now - self.t_prev),
        }
        if self.partial:
            out.update(partial_stats(batch.trajs, st.version - 1, k))
            out["async/inflight_updates"] = _inflight(st.engine) - self.inflight0
            self.inflight0 = _inflight(st.engine)
        self.idle0, self.busy0, self.t_prev = pipe.idle_s, pipe.busy_s, now
        text = self.guard.observe(st.step, {**row, **out})
        if text:
            st.warnings.setdefault("offpolicy_drift", text)
        return out

    async def on_engine(self, st: Any, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self.pipe.on_engine(st.version, None, fn)

    async def drain(self, st: Any) -> None:
        """Wait for the batches pinned to versions older than the trainer's (a resume could not regenerate them)."""
        for b in list(self.pipe.batches.values()):
            if b.trajs is None and b.version < st.version:
                await asyncio.wrap_future(b.done)

    def checkpoint_state(self, st: Any) -> dict[str, Any]:
        return {"async": pipeline_state(self.pipe, st.cfg.rl.steps - 1)}

    async def close(self, st: Any) -> None:
        self.pipe.close()
        torch.set_num_threads(self.threads)
        if st.engine.weights_version != st.version:  # the producer left a pinned, older version installed
            st.trainer.push_weights(st.engine, st.version)
