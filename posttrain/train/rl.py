"""The RL loop: rollout, verifiable rewards, advantages, clipped update, versioned sync.

    for step in range(start, cfg.rl.steps):
        batch = await source.next(st)               # 1-2. tasks drawn, trajectories sampled and verified,
                                                    #      the scheduler observes them (batch_source.py)
        adv = estimate_advantages(batch.groups)     # 3. group-relative advantages
        stats = trainer.update(trajs, adv)          # 3. clipped policy-gradient step (trainer.py)
        source.sync(st)                             # 4. versioned, verified weight sync
        evaluate / detect / log / checkpoint

What varies is passed in, never branched on: the `Trainer` (this process, or sharded over
ranks: train/trainer.py) owns the model, the optimizer and its schedule, the update, weight
sync and checkpoints; the `BatchSource` (synchronous, or rollouts running ahead by at most
rl.max_staleness versions: train/async_rl/source.py) yields scored trajectories with their
weights version. Everything the loop needs lives in `RLState` (built fresh or from a
checkpoint). Infra-error samples are stored but never enter the gradient. Ctrl-C saves a
checkpoint at the last finished step.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from posttrain.config import RunConfig
from posttrain.eval.heldout import HeldoutResult
from posttrain.registry import registry
from posttrain.rollout import make_engine
from posttrain.rollout.engine import ClusterMetrics, MatmulPrecision
from posttrain.schedule import Scheduler
from posttrain.schedule.filtering import has_signal
from posttrain.store.metrics import MetricsLog, run_metrics
from posttrain.store.run import RunDir
from posttrain.store.trajectories import TrajectoryStore
from posttrain.train.async_rl.guard import OffPolicyDriftExceeded
from posttrain.train.async_rl.source import AsyncBatchSource
from posttrain.train.batch_source import (  # noqa: F401  (group_by_task, rollout_batch, sampling_params: re-exported)
    BatchSource, ScoredBatch, SyncBatchSource, group_by_task, rollout_batch, sampling_params)
from posttrain.train.advantages import estimate_advantages, trained_advantages  # noqa: F401  (estimate_advantages: re-exported)
from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state, set_rng_state
from posttrain.train.infra_guard import InfraErrorGuard, InfraErrorRateExceeded
from posttrain.train.longtail_source import LongTailBatchSource
from posttrain.train.loss_norm import step_counts
from posttrain.train.step_memory import release_free_heap, step_memory
from posttrain.train.trainer import Trainer, default_trainer, reference_model
from posttrain.train.update import NonFiniteLoss, metric_name
from posttrain.types import Task, Trajectory
from posttrain.verifiers.overlong import make_overlong
from posttrain.verifiers.run import VerifierRunner


@dataclass
class RLState:
    cfg: RunConfig
    run_dir: Path
    tok: Any
    engine: Any
    trainer: Trainer
    scheduler: Scheduler
    runner: VerifierRunner
    store: TrajectoryStore
    metrics: MetricsLog
    train_tasks: list[Task]
    eval_tasks: list[Task]
    step: int = 0  # next step to run
    version: int = 0  # weights version held by the engine
    history: list[dict[str, float]] = field(default_factory=list)
    infra_guard: InfraErrorGuard | None = None  # warns or stops when too many verifications are infra errors
    warnings: dict[str, str] = field(default_factory=dict)  # run_health's findings by kind, each once
    agent_proxy: Any = None  # rollout/agent/external.py AgentProxyFactory for agent.external (the recipe's)
    async_state: dict | None = None  # the asynchronous source's in-flight batches, from the checkpoint resumed
    # Per-token advantages in place of rl.advantage on the rewards: trajectories [B] -> (adv [B, W], per-sample
    # mean [B] for the store). On-policy distillation's teacher (train/distill.py, recipes/distill.py).
    token_advantages: Callable[[list[Trajectory]], tuple[torch.Tensor, torch.Tensor]] | None = None

    @property
    def model(self) -> Any:
        """The trained policy as a plain (or LoRA-wrapped) model; gathered from the ranks when sharded."""
        return self.trainer.export_model()


EngineFactory = Callable[[RunConfig, Any, Any], Any]  # (cfg, model, tokenizer) -> Engine
TrainerFactory = Callable[[RunConfig, Any, Any, Any], Trainer]  # (cfg, model, tokenizer, KL reference) -> Trainer


def local_engine(cfg: RunConfig, model: Any, tok: Any) -> Any:
    """The default: `engine.name` in this process, on its own copy of the weights."""
    return make_engine(cfg.engine.name, copy.deepcopy(model), tok, **cfg.engine.args)


def _with_update_precision(cfg: RunConfig, engine: Any) -> RunConfig:
    """`cfg` with `trainer.precision: auto` resolved for this run's update (lora.resolve_precision:
    bf16 autocast on a CPU whose rollouts run the bf16 matmuls it measured faster), said once on
    stderr when it turns bf16 on. A sharded trainer keeps its own policy (`trainer.mixed_precision`)."""
    from posttrain.train.lora import resolve_precision

    if cfg.trainer.world_size > 1:
        return cfg
    tcfg = resolve_precision(cfg.trainer, engine.matmul_dtype if isinstance(engine, MatmulPrecision) else None)
    if tcfg is cfg.trainer:
        return cfg
    print("posttrain: trainer.precision=auto: the update runs under bf16 autocast, as the rollouts' bf16 "
          "matmuls do (measured faster here; trainer.precision=fp32 keeps it fp32)", file=sys.stderr)
    return cfg.model_copy(update={"trainer": tcfg})


def make_scheduler(cfg: RunConfig, train_tasks: Sequence[Task]) -> Scheduler:
    """The run's scheduler over its training tasks, from `schedule` and the domains' mixture weights."""
    mixture = {d: c.weight for d, c in cfg.tasks.domains.items() if any(t.domain == d for t in train_tasks)}
    cur = cfg.schedule.curriculum  # its levels shaped the task pool (tasks/splits.py); the rest steers draws
    steer = cur is not None and cur.steer  # steer=false: the pooled levels are drawn from alike, nothing moves
    return Scheduler(list(train_tasks), mixture or None, policy=cfg.schedule.name, seed=cfg.seed,
                     curriculum=cur.model_dump(exclude={"levels", "steer"}) if steer else None,
                     domain_shares=cfg.schedule.domain_shares, **cfg.schedule.args)


def build_state(cfg: RunConfig, run_dir: Path, model: Any, tok: Any, train_tasks: Sequence[Task],
                eval_tasks: Sequence[Task], sandbox: Any, resume: bool = False,
                engine_factory: EngineFactory | None = None, runner: VerifierRunner | None = None,
                trainer_factory: TrainerFactory | None = None, agent_proxy: Any = None) -> RLState:
    """`engine_factory` builds the rollout engine from the (possibly resumed) policy; the recipe
    passes a Ray-backed one for `cluster.address` (posttrain/recipes/cluster.py): train/ never
    imports distributed/. `runner`: the run's verifier runner, shared with its evals (default: one
    over `sandbox`). `trainer_factory`: default_trainer (sharded on rank 0 of N ranks, else local). `agent_proxy`:
    what serves the engine to agent.external's process (the recipe passes serve/proxy_host.py's)."""
    torch.manual_seed(cfg.seed)
    sched = make_scheduler(cfg, train_tasks)
    ckpt = latest_checkpoint(run_dir) if resume else None
    if ckpt is not None and cfg.trainer.lora is None:  # with LoRA the caller's model is the (unchanged) base
        from posttrain.models import load_policy

        model, tok = load_policy(ckpt)
    engine = (engine_factory or local_engine)(cfg, model, tok)
    cfg = _with_update_precision(cfg, engine)
    ts = load_trainer_state(ckpt) if ckpt is not None else None
    ref = reference_model(cfg, model, ts)
    trainer = trainer_factory(cfg, model, tok, ref) if trainer_factory else default_trainer(cfg, model, tok, ref)
    del model  # the trainer holds it (sharded: the ranks do)
    guard = InfraErrorGuard(cfg.rl.infra_error, sandbox)
    concurrency = verify_concurrency(cfg)
    runner = runner or VerifierRunner(sandbox, concurrency=concurrency, retries=cfg.sandbox.retries,
                                      format_weight=cfg.rl.format_weight, overlong=make_overlong(cfg))
    st = RLState(cfg, run_dir, tok, engine, trainer, sched, runner,
                 RunDir(run_dir).store(background=True), run_metrics(cfg, run_dir, "rl"),
                 list(train_tasks), list(eval_tasks), infra_guard=guard, agent_proxy=agent_proxy)
    if ts is not None:
        st.trainer.restore(ckpt, ts)
        st.scheduler.load_state_dict(ts["scheduler"])
        set_rng_state(ts["rng"])
        st.step, st.version = ts["step"] + 1, ts["version"]
        st.async_state = ts.get("async")
        st.trainer.push_weights(st.engine, st.version)  # LoRA: the adapters just loaded
        st.store.truncate_after(ts["step"])
        st.metrics.truncate_after(ts["step"])
    elif resume:  # interrupted before the first checkpoint: start RL over, keep nothing half-done
        st.store.truncate_after(-1)
        st.metrics.truncate_after(-1)
    return st


def verify_concurrency(cfg: RunConfig) -> int:
    """sandbox.concurrency, 0 = the number of cores (at least 2: verification waits on subprocesses)."""
    import os

    return max(2, cfg.sandbox.concurrency or os.cpu_count() or 1)


def batch_source_for(cfg: RunConfig) -> BatchSource:
    """The source the config asks for: slow tasks in their own queue (rl.longtail.enabled), rollouts
    running ahead by at most rl.max_staleness versions, or generated when the loop asks (the default).
    Recipes build it and hand it to `train_rl`."""
    if cfg.rl.longtail.enabled:
        return LongTailBatchSource(cfg.rl.longtail)
    return AsyncBatchSource(cfg.rl.max_staleness) if cfg.rl.max_staleness > 0 else SyncBatchSource()


def learn(st: RLState, batch: ScoredBatch, source: BatchSource) -> dict[str, float]:
    """Everything after the rollout: advantages, update, sync, store; the step's metrics row."""
    cfg = st.cfg.rl
    # distillation: every group carries the teacher's signal, equal rewards or not; [B, W] and its per-sample mean
    distilling = st.token_advantages is not None
    trained = batch.groups if distilling else batch.train_groups
    flat = [t for g in trained for t in g]
    t_adv = time.perf_counter()
    if distilling and flat:
        adv, per_sample = st.token_advantages(flat)  # the teacher's forward: the second model's share of the step
    else:
        adv = per_sample = estimate_advantages(trained, cfg.advantage.name, cfg.advantage.args)  # [B]
    teacher_s = time.perf_counter() - t_adv
    learn_idx = [i for i, t in enumerate(flat) if not t.infra_error]
    stats: dict[str, float] = {}
    if learn_idx:
        # rl.loss_norm's denominators count every scored sample of the step, dropped groups included
        stats = st.trainer.update([flat[i] for i in learn_idx], adv[learn_idx], batch.correction, batch.lr_scale,
                                  counts=step_counts(batch.trajs, flat))
    t_upd = time.perf_counter()
    st.version += 1
    sync_row = source.sync(st)
    sync_s = time.perf_counter() - t_upd
    st.store.put_many(batch.trajs, advantages=trained_advantages(batch.trajs, flat, per_sample))  # the viewer reads them
    trajs = batch.trajs
    scored = [t for t in trajs if not t.infra_error]
    by_dom: dict[str, list[float]] = {}
    for t in scored:
        by_dom.setdefault(t.domain, []).append(t.reward)
    step_s = time.perf_counter() - batch.t_start
    row = {
        "reward/mean": sum(t.reward for t in scored) / max(1, len(scored)),
        **{f"reward/{d}": sum(v) / len(v) for d, v in by_dom.items()},
        "groups/dropped_frac": 1 - len(trained) / max(1, len(batch.groups)),
        # of every group drawn (refill rounds included): rewards all equal, no gradient; with refill off
        # it equals dropped_frac, with it on dropped_frac also counts the surplus groups left out
        "groups/zero_variance_frac": sum(not has_signal(g) for g in batch.groups) / max(1, len(batch.groups)),
        "groups/trained": len(trained),
        "infra_error_frac": 1 - len(scored) / max(1, len(trajs)),
        "format_fail_frac": sum(1 for t in scored if t.verify.details.get("rule") == "format") / max(1, len(scored)),
        "completion_tokens/mean": sum(len(x.token_ids) for t in trajs for x in t.turns if x.trainable) / max(1, len(trajs)),
        "time/generate_s": batch.t_gen - batch.t_start, "time/verify_s": batch.t_ver - batch.t_gen,
        "time/update_s": t_upd - batch.t_ver, "time/sync_s": sync_s, "time/step_s": step_s,
        "time/sync_frac": sync_s / step_s, "weights_version": st.version,
        **({"time/teacher_s": teacher_s, "time/teacher_frac": teacher_s / step_s} if distilling else {}),
        **{metric_name(k): v for k, v in stats.items()},
        **st.scheduler.metrics(), **batch.metrics, **sync_row,
    }
    for part in (st.engine, st.runner.ctx.sandbox):  # Ray parts: per-node throughput, queue depth, failures
        row.update(part.cluster_metrics() if isinstance(part, ClusterMetrics) else {})
    return row


async def run_eval(st: RLState) -> HeldoutResult:
    from posttrain.eval.heldout import evaluate_heldout_mixed  # multi-step tasks run as agent episodes

    e = st.cfg.eval
    return await evaluate_heldout_mixed(st.engine, st.tok, st.eval_tasks, st.runner, e.max_new_tokens,
                                        st.step, st.cfg.agent, temperature=e.temperature, seed=e.seed)


def save(st: RLState, step: int, source: BatchSource | None = None) -> None:
    """A checkpoint after `step`: the trainer's part (train/trainer.py) plus the scheduler, the
    versions and what the batch source must hold to resume exactly (in-flight batches, "async")."""
    state = {"scheduler": st.scheduler.state_dict(), "step": step, "version": st.version,
             **(source.checkpoint_state(st) if source is not None else {})}
    st.store.flush()  # a checkpoint never names a step whose trajectories are still queued
    st.trainer.save(st.run_dir, step, st.tok, state, keep=st.cfg.rl.keep_checkpoints)


def after_step(st: RLState, row: dict, warn: Callable[[str], None], stop: Callable[[int, dict], bool] | None,
               budget_s: float | None, t_start: float) -> bool:
    """After step st.step - 1: new learning warnings once each; True when the stop hook or the
    wall-clock budget ends the run."""
    from posttrain.train.run_health import WINDOW, learning_warnings

    if len(st.history) % WINDOW == 0 or st.step == st.cfg.rl.steps:
        for kind, text in learning_warnings(st.history).items():
            if kind not in st.warnings:
                st.warnings[kind] = text
                warn(text)
    return (stop is not None and stop(st.step - 1, row)) or (budget_s is not None and
                                                            time.perf_counter() - t_start >= budget_s)


async def observe_step(st: RLState, source: BatchSource, row: dict[str, float]) -> None:
    """The step's periodic checks into its row: held-out eval (on the engine, wherever the source
    runs it) and the reward-hacking detectors (detect/<name>), the step's memory (mem/*), then the metrics log."""
    cfg = st.cfg.rl
    if cfg.eval_every and (st.step + 1) % cfg.eval_every == 0:
        res = await source.on_engine(st, lambda: run_eval(st))
        row.update({f"eval/pass@1/{d}": v for d, v in res.by_domain().items()})
        row["eval/pass@1"] = res.mean_over_domains()
    if st.cfg.log.detect_every and (st.step + 1) % st.cfg.log.detect_every == 0:
        from posttrain.eval.detectors.live import live_findings

        st.store.flush()  # the background writer's queued steps are on disk before the detectors read
        for f in live_findings(RunDir(st.run_dir), [*st.history, {"step": st.step, **row}], st.step):
            row.update(f.metrics())  # detect/<name>, detect/<name>/score
            if f.alarm and f.warning_key not in st.warnings:  # a detector's first alarm: a run warning, once
                st.warnings[f.warning_key] = f.warning()
                print(f"posttrain: warning: {f.warning()}", file=sys.stderr)
    release_free_heap()  # the step's freed activations leave the arenas (step_memory.py: why)
    row.update(step_memory())  # mem/*: read last, so the step's eval and detectors are inside it
    st.metrics.log(st.step, row)
    st.history.append(row)


# What stops a run and keeps a checkpoint at the last finished step (Ctrl-C: a cancellation under asyncio.run).
STOPS = (KeyboardInterrupt, asyncio.CancelledError, InfraErrorRateExceeded, OffPolicyDriftExceeded)


async def train_rl(st: RLState, source: BatchSource | None = None, on_step: Callable[[int, dict], None] | None = None,
                   stop: Callable[[int, dict], bool] | None = None, budget_s: float | None = None,
                   on_warning: Callable[[str], None] | None = None) -> RLState:
    """Run steps st.step .. cfg.rl.steps-1 on batches from `source` (default: batch_source_for(st),
    asynchronous when rl.max_staleness > 0). Checkpoints every `checkpoint_every` and at the end.

    `stop(step, row)` returning True ends the run after that step (a benchmark's target, an
    early stop); `budget_s` ends it once the loop has run that many seconds. Either way the
    last step is checkpointed, as at the normal end. `on_warning` receives each warning of
    run_health.learning_warnings once (default: printed to stderr) and st.warnings keeps them."""
    cfg = st.cfg.rl
    source = source or batch_source_for(st.cfg)
    last_done = st.step - 1
    t_start = time.perf_counter()
    warn = on_warning or (lambda w: print(f"posttrain: warning: {w}", file=sys.stderr))
    source.start(st)
    try:
        while st.step < cfg.steps:
            batch = await source.next(st)
            row = learn(st, batch, source)
            row.update(source.after_update(st, batch, row))
            await observe_step(st, source, row)
            last_done = st.step
            if on_step is not None:
                on_step(st.step, row)
            if cfg.checkpoint_every and (st.step + 1) % cfg.checkpoint_every == 0:
                await source.drain(st)
                save(st, st.step, source)
            st.step += 1
            if after_step(st, row, warn, stop, budget_s, t_start):
                break
        if last_done >= 0 and latest_checkpoint(st.run_dir) != RunDir(st.run_dir).checkpoint(last_done):
            await source.drain(st)  # a stop or budget end resumes exactly too
            save(st, last_done, source)
    except STOPS:
        if last_done >= 0:
            save(st, last_done, source)  # an interrupt does not wait: unfinished async batches are regenerated
        raise
    except NonFiniteLoss as e:  # weights may be half-updated: keep the last good checkpoint, write nothing
        kept = latest_checkpoint(st.run_dir)
        raise NonFiniteLoss(f"RL step {st.step}: {e}; run stopped, last good checkpoint kept: {kept or 'none yet'}") from None
    finally:
        await source.close(st)
    st.async_state = None
    return st
