"""The asynchronous RL loop (rl.max_staleness = K >= 1): the trainer consumes batches the producer
generated up to K weight versions earlier.

    trainer (main thread)                         producer (pipeline.py, its own thread)
    issue batches start..start+K                  generate + verify batch s with version v(s)-K
    for s: take batch s (wait: consumer idle)     ... batch s+1, s+2 ... (wait: producer idle)
           staleness check, learn (corrected)
           publish version v(s)+1, issue s+K+1

`train_rl` calls `train_rl_async` when rl.max_staleness > 0, with the same arguments and the
same run directory (metrics, trajectories, checkpoints). Each step's row has the synchronous
loop's keys plus: async/staleness (versions between the samples and the trainer),
async/staleness_frac/k (share of the step's samples k versions old), async/reused and
async/regenerated (in-flight batches carried over a resume, cumulative), async/stale_dropped
(batches regenerated because they were more than K old, cumulative), time/consumer_idle_s,
time/producer_idle_s and time/producer_busy_s (since the previous step), and the
correction's train/offpolicy/* stats, and async/lr_scale (the update's lr multiplier,
rl.stale_lr of the mean token age: stale gradients take smaller steps). With rl.partial_rollouts also async/token_staleness_frac/k
(share of the step's completion tokens k versions old), async/partial_frac (share of samples
whose tokens span two or more versions) and async/inflight_updates (weights the engine took
between decode steps, since the previous step). The drift guard (guard.py) reads
train/offpolicy/kl.

torch's thread pool is process-wide, so while the loop runs each torch op uses half of the
threads the run had (`threads`), and the producer and the trainer together use all of them.

Limits: one engine and one producer; partial rollouts need an engine that declares
`inflight_weight_update` (`fast`; config_check refuses the others at load).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, Callable

import torch

from posttrain.registry import registry
from posttrain.train.async_rl.correction import correction_for
from posttrain.train.async_rl.guard import DriftGuard, OffPolicyDriftExceeded
from posttrain.train.async_rl.pipeline import Pipeline
from posttrain.train.async_rl.state import pipeline_state, restore


def _snapshot(model: Any) -> dict[str, Any]:
    from posttrain.train.rl_model import plain_state

    return {k: v.detach().clone() for k, v in plain_state(model).items()}  # the trainer mutates its own in place


def _inflight(engine: Any) -> int:
    return int(getattr(engine, "counters", {}).get("inflight_updates", 0))


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
    when every token is fresh, so K = 0 through this loop stays the synchronous run bitwise."""
    ages = [version - v for t in trajs if not t.infra_error for turn in t.turns if turn.trainable
            for v in (turn.token_versions or (t.weights_version,) * len(turn.token_ids))]
    mean = sum(ages) / len(ages) if ages else 0.0
    return 1.0 if mean == 0 else STALE_LR[rule](mean)


@registry("rl_loop").register("async")
async def train_rl_async(st: Any, on_step: Callable[[int, dict], None] | None = None,
                         stop: Callable[[int, dict], bool] | None = None, budget_s: float | None = None,
                         on_warning: Callable[[str], None] | None = None, max_staleness: int | None = None) -> Any:
    """`train_rl` for K >= 1. `max_staleness` overrides rl.max_staleness (0 runs the synchronous
    schedule through this machinery, which tests compare with the synchronous loop)."""
    from posttrain.train.checkpoint import latest_checkpoint
    from posttrain.train.infra_guard import InfraErrorRateExceeded
    from posttrain.train.rl import after_step, learn_from, rollout_batch, run_eval, save
    from posttrain.train.update import NonFiniteLoss

    cfg = st.cfg.rl
    if getattr(st, "sharded", None) is not None:
        from posttrain.errors import PosttrainError

        raise PosttrainError("rl.max_staleness > 0 does not run with a sharded (multi-rank) trainer yet; set rl.max_staleness=0")
    k = cfg.max_staleness if max_staleness is None else max_staleness
    corr = correction_for(cfg.offpolicy) if k > 0 else None
    guard = DriftGuard(cfg.offpolicy)
    warn = on_warning or (lambda w: print(f"posttrain: warning: {w}", file=sys.stderr))
    threads = torch.get_num_threads()
    if k > 0:  # producer and trainer run at once: each torch op on half the cores, not 2x oversubscribed
        torch.set_num_threads(max(1, threads // 2))
    partial = bool(cfg.partial_rollouts) and k > 0
    if partial and not hasattr(st.engine, "set_weight_source"):
        from posttrain.errors import PosttrainError

        raise PosttrainError(f"rl.partial_rollouts=true: the engine ({type(st.engine).__name__}) cannot take weights "
                             "between decode steps (no set_weight_source); set rl.partial_rollouts=false")
    pipe = Pipeline(st, k, partial)
    floor, start = st.version, st.step  # the oldest weights this process has: the checkpoint's
    pipe.publish(st.version, _snapshot(st.model))
    reused, regenerated = restore(pipe, st, st.async_state, floor)
    stale_dropped = 0
    next_issue = max([st.step - 1, *pipe.batches]) + 1

    def issue_upto(last: int) -> None:
        nonlocal next_issue
        while next_issue <= min(last, cfg.steps - 1):
            held = floor + (next_issue - start)  # the version the trainer holds at that step: one per step
            pipe.issue(next_issue, st.scheduler.next_batch(cfg.prompts_per_step), max(floor, held - k), limit=held)
            next_issue += 1

    def publish(s: Any) -> float:
        t0 = time.perf_counter()
        s.version += 1
        pipe.publish(s.version, _snapshot(s.model))
        return time.perf_counter() - t0

    def checkpoint(step: int) -> None:
        save(st, step, extra={"async": pipeline_state(pipe, cfg.steps - 1)})

    async def drain_older_than(version: int) -> None:
        for b in list(pipe.batches.values()):
            if b.trajs is None and b.version < version:
                await asyncio.wrap_future(b.done)

    issue_upto(st.step + k)
    last_done, t_start, t_prev = st.step - 1, time.perf_counter(), time.perf_counter()
    idle0, busy0 = pipe.idle_s, pipe.busy_s
    inflight0 = _inflight(st.engine)
    try:
        while st.step < cfg.steps:
            t_wait = time.perf_counter()
            b = await pipe.take(st.step)
            oldest = min([b.version, *(t.weights_version for t in b.trajs)])  # per sample: an engine may lag its pin
            if st.version - oldest > k:  # e.g. a saved batch older than this run allows: never train on it
                stale_dropped += 1
                trajs, t_gen, t_ver = await pipe.on_engine(st.version, None, lambda: rollout_batch(st, b.tasks, b.step))
                b.trajs, b.version, b.generate_s, b.verify_s = trajs, st.version, t_gen - t_wait, t_ver - t_gen
            consumer_idle = time.perf_counter() - t_wait
            t_ver = time.perf_counter()
            t_gen = t_ver - b.verify_s
            lr_scale = stale_lr_scale(b.trajs, st.version, cfg.stale_lr)
            row = learn_from(st, b.trajs, t_gen - b.generate_s, t_gen, t_ver, sync=publish, correction=corr,
                             lr_scale=lr_scale)
            issue_upto(st.step + k + 1)  # after observe(step): the order the synchronous loop draws in
            n = max(1, len(b.trajs))
            ages = [st.version - 1 - t.weights_version for t in b.trajs]
            now = time.perf_counter()
            row.update({
                "async/staleness": st.version - 1 - b.version,
                **{f"async/staleness_frac/{a}": sum(x == a for x in ages) / n for a in range(k + 1)},
                "async/lr_scale": lr_scale, "async/reused": reused, "async/regenerated": regenerated, "async/stale_dropped": stale_dropped,
                "time/consumer_idle_s": consumer_idle, "time/producer_idle_s": pipe.idle_s - idle0,
                "time/producer_busy_s": pipe.busy_s - busy0, "time/step_s": now - t_prev,
                "time/sync_frac": row["time/sync_s"] / max(1e-9, now - t_prev),
            })
            if partial:
                row.update(partial_stats(b.trajs, st.version - 1, k))
                row["async/inflight_updates"] = _inflight(st.engine) - inflight0
                inflight0 = _inflight(st.engine)
            idle0, busy0, t_prev = pipe.idle_s, pipe.busy_s, now
            text = guard.observe(st.step, row)
            if text:
                st.warnings.setdefault("offpolicy_drift", text)
            if cfg.eval_every and (st.step + 1) % cfg.eval_every == 0:
                res = await pipe.on_engine(st.version, None, lambda: run_eval(st))
                row.update({f"eval/pass@1/{d}": v for d, v in res.by_domain().items()})
                row["eval/pass@1"] = res.mean_over_domains()
            st.metrics.log(st.step, row)
            st.history.append(row)
            pipe.consumed(st.step)
            last_done = st.step
            if on_step is not None:
                on_step(st.step, row)
            if cfg.checkpoint_every and (st.step + 1) % cfg.checkpoint_every == 0:
                await drain_older_than(st.version)
                checkpoint(st.step)
            st.step += 1
            if after_step(st, row, warn, stop, budget_s, t_start):
                break
        if last_done >= 0 and latest_checkpoint(st.run_dir) != st.run_dir / "checkpoints" / f"step-{last_done}":
            await drain_older_than(st.version)  # a stop or budget end resumes exactly too
            checkpoint(last_done)
    except (KeyboardInterrupt, asyncio.CancelledError, InfraErrorRateExceeded, OffPolicyDriftExceeded):
        if last_done >= 0:
            checkpoint(last_done)  # an interrupt does not wait: unfinished batches are regenerated
        raise
    except NonFiniteLoss as e:
        kept = latest_checkpoint(st.run_dir)
        raise NonFiniteLoss(f"RL step {st.step}: {e}; run stopped, last good checkpoint kept: {kept or 'none yet'}") from None
    finally:
        pipe.close()
        torch.set_num_threads(threads)
    if st.engine.weights_version != st.version:  # the producer left a pinned, older version installed
        from posttrain.train.rl_model import plain_state

        st.engine.load_weights(plain_state(st.model), st.version)
    st.async_state = None
    return st
