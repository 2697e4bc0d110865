"""The RL loop: rollout, verifiable rewards, advantages, clipped update, versioned sync.

    for step in range(start, cfg.rl.steps):
        tasks = scheduler.next_batch(n)                          # stratified, pass-rate adaptive
        trajs = await rollout(engine, tasks)                     # 1. sample trajectories
        trajs = await verifier.verify_all(tasks, trajs)          # 2. verifiable rewards + format rule
        scheduler.observe(groups)                                # pass rates -> sampling weights
        adv = estimate_advantages(rewards)                       # 3. group-relative advantages
        stats = update_policy(policy, trajs, adv, cfg)           # 3. clipped policy-gradient step
        sync_weights(policy, engine, version)                    # 4. versioned, verified weight sync
        evaluate / checkpoint / log

Everything the loop needs lives in `RLState` (built fresh or from a checkpoint); every
piece the loop calls is a module of its own. Infra-error samples are stored but never
enter the gradient. Ctrl-C saves a checkpoint at the last finished step.
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
from posttrain.eval.heldout import HeldoutResult, evaluate_heldout
from posttrain.registry import registry
from posttrain.rollout import make_engine
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.single_turn import rollout_single_turn
from posttrain.schedule import Scheduler
from posttrain.store.metrics import MetricsLog, run_metrics
from posttrain.store.trajectories import TrajectoryStore
from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint, set_rng_state
from posttrain.train.infra_guard import InfraErrorGuard, InfraErrorRateExceeded
from posttrain.train.loss_norm import step_counts
from posttrain.train.lora import export_model, prepare_model, trainable_parameters
from posttrain.train.rl_model import adapter_state, load_adapter_state, plain_state
from posttrain.train.update import NonFiniteLoss, update_policy
from posttrain.types import Task, Trajectory
from posttrain.verifiers.overlong import make_overlong
from posttrain.verifiers.run import VerifierRunner


@dataclass
class RLState:
    cfg: RunConfig
    run_dir: Path
    model: Any
    tok: Any
    engine: Any
    opt: torch.optim.Optimizer
    lr_sched: Any
    scheduler: Scheduler
    runner: VerifierRunner
    store: TrajectoryStore
    metrics: MetricsLog
    train_tasks: list[Task]
    eval_tasks: list[Task]
    ref_model: Any | None = None
    step: int = 0  # next step to run
    version: int = 0  # weights version held by the engine
    history: list[dict[str, float]] = field(default_factory=list)
    infra_guard: InfraErrorGuard | None = None  # warns or stops when too many verifications are infra errors
    warnings: dict[str, str] = field(default_factory=dict)  # run_health's findings by kind, each once
    sharded: Any = None  # rank 0's handle on an N-rank FSDP2/TP trainer (train/sharded/rl_hooks.py), else None
    async_state: dict | None = None  # the asynchronous loop's in-flight batches, from the checkpoint resumed


EngineFactory = Callable[[RunConfig, Any, Any], Any]  # (cfg, model, tokenizer) -> Engine


def local_engine(cfg: RunConfig, model: Any, tok: Any) -> Any:
    """The default: `engine.name` in this process, on its own copy of the weights."""
    return make_engine(cfg.engine.name, copy.deepcopy(model), tok, **cfg.engine.args)


def build_state(cfg: RunConfig, run_dir: Path, model: Any, tok: Any, train_tasks: Sequence[Task],
                eval_tasks: Sequence[Task], sandbox: Any, resume: bool = False,
                engine_factory: EngineFactory | None = None) -> RLState:
    """`engine_factory` builds the rollout engine from the (possibly resumed) policy; the recipe
    passes a Ray-backed one for `cluster.address` (posttrain/recipes/cluster.py): train/ never
    imports distributed/."""
    torch.manual_seed(cfg.seed)
    mixture = {d: c.weight for d, c in cfg.tasks.domains.items() if any(t.domain == d for t in train_tasks)}
    sched = Scheduler(list(train_tasks), mixture or None, policy=cfg.schedule.policy, seed=cfg.seed,
                      **cfg.schedule.args)
    ckpt = latest_checkpoint(run_dir) if resume else None
    if ckpt is not None and cfg.trainer.lora is None:  # with LoRA the caller's model is the (unchanged) base
        from posttrain.models import load_policy

        model, tok = load_policy(ckpt)
    engine = (engine_factory or local_engine)(cfg, model, tok)
    ref = copy.deepcopy(model).eval() if cfg.rl.kl_coef > 0 else None  # the plain base, before any LoRA
    ts = load_trainer_state(ckpt) if ckpt is not None else None
    if ref is not None and ts is not None and "ref_model" in ts:  # the run's base, not the resumed policy
        ref.load_state_dict(ts["ref_model"])
    model = prepare_model(model, cfg.trainer)  # trainer: LoRA / gradient checkpointing (rl_model.py)
    opt = torch.optim.AdamW(trainable_parameters(model), lr=cfg.rl.lr, weight_decay=0.0, betas=(0.9, 0.99),
                            foreach=True)  # CPU defaults to a per-tensor loop
    sharded = None
    from posttrain.train.sharded.session import active as sharded_active

    if sharded_active():  # rank 0 of N: shards on every rank; `opt` becomes the LR schedule's holder
        from posttrain.train.sharded import rl_hooks

        sharded, opt = rl_hooks.start(cfg, model, tok, ref)
        model, ref = None, None  # the ranks hold both, sharded
    warm = max(1, cfg.rl.warmup_steps)
    lr_sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    st = RLState(cfg, run_dir, model, tok, engine, opt, lr_sched, sched,
                 VerifierRunner(sandbox, concurrency=max(2, cfg.sandbox.concurrency or 4), retries=cfg.sandbox.retries,
                                format_weight=cfg.rl.format_weight, overlong=make_overlong(cfg)),
                 TrajectoryStore(run_dir / "trajectories.sqlite", background=True), run_metrics(cfg, run_dir, "rl"),
                 list(train_tasks), list(eval_tasks), ref)
    st.infra_guard = InfraErrorGuard(cfg.rl.infra_error, sandbox)
    st.sharded = sharded
    if ts is not None:
        if st.sharded is not None:
            from posttrain.train.sharded import rl_hooks

            rl_hooks.restore(st, ckpt, ts)
        elif "dcp" in ts:  # written by N ranks, resumed by one (parallel/dcp.py)
            from posttrain.parallel.dcp import load_into_plain

            load_into_plain(st.model, st.opt, ckpt.parent / ts["dcp"], ts["lr_scheduler"].get("_last_lr"))
        else:
            st.opt.load_state_dict(ts["optimizer"])
        st.lr_sched.load_state_dict(ts["lr_scheduler"])
        st.scheduler.load_state_dict(ts["scheduler"])
        set_rng_state(ts["rng"])
        st.step, st.version = ts["step"] + 1, ts["version"]
        st.async_state = ts.get("async")
        if ts.get("lora") is not None:
            load_adapter_state(st.model, ts["lora"])
        if st.sharded is None:  # sharded: the engine was built from the checkpoint's own weights
            st.engine.load_weights(plain_state(st.model), st.version)
        st.store.truncate_after(ts["step"])
        st.metrics.truncate_after(ts["step"])
    elif resume:  # interrupted before the first checkpoint: start RL over, keep nothing half-done
        st.store.truncate_after(-1)
        st.metrics.truncate_after(-1)
    return st


def group_by_task(trajs: Sequence[Trajectory]) -> list[list[Trajectory]]:
    groups: dict[int, list[Trajectory]] = {}
    for t in trajs:
        groups.setdefault(t.group, []).append(t)
    return [groups[g] for g in sorted(groups)]


def estimate_advantages(groups: Sequence[Sequence[Trajectory]], name: str) -> torch.Tensor:
    """One advantage per trajectory ([B], flattened group-major); infra errors get 0."""
    fn = registry("advantage").get(name)
    out = []
    for g in groups:
        scored = [t for t in g if not t.infra_error]
        if len(scored) < 2:
            out += [0.0] * len(g)
            continue
        adv = iter(fn(torch.tensor([[t.reward for t in scored]], dtype=torch.float32))[0].tolist())
        out += [0.0 if t.infra_error else next(adv) for t in g]
    return torch.tensor(out)


def sync_weights(st: RLState) -> float:
    """Push the trainer's weights to the engine as a new version; returns seconds spent."""
    t0 = time.perf_counter()
    st.version += 1
    if st.sharded is not None:  # bucketed, verified, no second full copy (train/sharded/sync.py)
        from posttrain.train.sharded import rl_hooks

        rl_hooks.push_weights(st)
        return time.perf_counter() - t0
    st.engine.load_weights(plain_state(st.model), st.version)  # LoRA merged in, read-only
    return time.perf_counter() - t0


def sampling_params(st: RLState, step: int) -> SamplingParams:
    """The rollout's sampling parameters for `step`: the seed is a pure function of (seed, step)."""
    cfg = st.cfg.rl
    return SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                          n=cfg.group_size, seed=st.cfg.seed * 100_003 + step)


async def rollout_batch(st: RLState, tasks: Sequence[Task], step: int) -> tuple[list[Trajectory], float, float]:
    """Generate and score `tasks` for `step` on st.engine: (trajs, generation end, verification end),
    both perf_counter times. Also the producer of the asynchronous loop (train/async_rl/)."""
    params = sampling_params(st, step)
    if any(t.limits.max_steps > 1 for t in tasks):  # agent episodes are scored inside the rollout
        from posttrain.rollout.agent.rl import rollout_mixed

        trajs = await rollout_mixed(st.engine, st.tok, tasks, params, st.cfg.agent, st.runner, step=step)
        t_gen = time.perf_counter()
    else:
        trajs = await rollout_single_turn(st.engine, st.tok, tasks, params, step=step)
        t_gen = time.perf_counter()
        trajs = await st.runner.verify_all({t.id: t for t in tasks}, trajs)
    return trajs, t_gen, time.perf_counter()


async def rl_step(st: RLState) -> dict[str, float]:
    t0 = time.perf_counter()
    tasks = st.scheduler.next_batch(st.cfg.rl.prompts_per_step)
    trajs, t_gen, t_ver = await rollout_batch(st, tasks, st.step)
    return learn_from(st, trajs, t0, t_gen, t_ver)


def learn_from(st: RLState, trajs: list[Trajectory], t0: float, t_gen: float, t_ver: float,
               sync: Callable[[RLState], float] = sync_weights, correction: Any = None,
               lr_scale: float = 1.0) -> dict[str, float]:
    """Everything after the rollout: observe, filter, advantages, update, sync, store; the metrics row.
    The asynchronous loop passes its own `sync` (publish a version), off-policy `correction` and
    `lr_scale` (this update's lr multiplier, from the samples' staleness)."""
    cfg = st.cfg.rl
    if st.infra_guard is not None:
        st.infra_guard.observe(trajs)  # rl.infra_error: warn loudly or stop, never carry on silently
    groups = group_by_task(trajs)
    st.scheduler.observe(groups)
    keep = st.scheduler.filter_groups(groups)
    train_groups = [g for g, k in zip(groups, keep) if k]
    flat = [t for g in train_groups for t in g]
    adv = estimate_advantages(train_groups, cfg.advantage)
    learn = [i for i, t in enumerate(flat) if not t.infra_error]
    stats: dict[str, float] = {}
    if learn:
        extra = {} if correction is None else {"correction": correction}
        if st.sharded is not None:
            from posttrain.train.sharded import rl_hooks

            stats = rl_hooks.update(st, [flat[i] for i in learn], adv[learn], **extra)
        else:
            if lr_scale != 1.0:
                for group in st.opt.param_groups:
                    group["lr"] *= lr_scale
            stats = update_policy(st.model, st.opt, [flat[i] for i in learn], adv[learn], cfg, st.tok.pad_token_id,
                                  st.ref_model, st.cfg.trainer, **extra, counts=step_counts(trajs, flat))
        st.lr_sched.step()  # every group's lr again from its base and the schedule: the scale lasts one update
    t_upd = time.perf_counter()
    sync_s = sync(st)
    st.store.put_many(trajs)
    scored = [t for t in trajs if not t.infra_error]
    by_dom: dict[str, list[float]] = {}
    for t in scored:
        by_dom.setdefault(t.domain, []).append(t.reward)
    step_s = time.perf_counter() - t0
    row = {
        "reward/mean": sum(t.reward for t in scored) / max(1, len(scored)),
        **{f"reward/{d}": sum(v) / len(v) for d, v in by_dom.items()},
        "groups/dropped_frac": 1 - len(train_groups) / max(1, len(groups)),
        "infra_error_frac": 1 - len(scored) / max(1, len(trajs)),
        "format_fail_frac": sum(1 for t in scored if t.verify.details.get("rule") == "format") / max(1, len(scored)),
        "completion_tokens/mean": sum(len(x.token_ids) for t in trajs for x in t.turns if x.trainable) / max(1, len(trajs)),
        "time/generate_s": t_gen - t0, "time/verify_s": t_ver - t_gen, "time/update_s": t_upd - t_ver,
        "time/sync_s": sync_s, "time/step_s": step_s, "time/sync_frac": sync_s / step_s,
        "weights_version": st.version,
        **{f"train/{k}": v for k, v in stats.items()},
        **st.scheduler.metrics(),
    }
    row.update(getattr(st.sharded, "last_sync", None) or {})  # bucketed sync from the ranks (rl_hooks.push_weights)
    for part in (st.engine, st.runner.ctx.sandbox):  # Ray parts: per-node throughput, queue depth, failures
        row.update(getattr(part, "cluster_metrics", dict)())
    return row


async def run_eval(st: RLState) -> HeldoutResult:
    from posttrain.eval.heldout import evaluate_heldout_mixed  # multi-step tasks run as agent episodes

    e = st.cfg.eval
    return await evaluate_heldout_mixed(st.engine, st.tok, st.eval_tasks, st.runner, e.max_new_tokens,
                                        st.step, st.cfg.agent, temperature=e.temperature, seed=e.seed)


def save(st: RLState, step: int, extra: dict | None = None) -> None:
    """`extra`: more trainer state (the asynchronous loop's in-flight batches, under "async")."""
    state = {"optimizer": st.opt.state_dict(), "lr_scheduler": st.lr_sched.state_dict(),
             "scheduler": st.scheduler.state_dict(), "step": step,
             "version": st.version, **(extra or {})}
    if st.ref_model is not None:
        state["ref_model"] = st.ref_model.state_dict()
    if st.sharded is not None:  # DCP shards + the manifested step-N/ (train/sharded/rl_hooks.py)
        from posttrain.train.sharded import rl_hooks

        st.store.flush()
        return rl_hooks.save(st, step, state)
    state["lora"] = adapter_state(st.model)  # None without LoRA
    st.store.flush()  # a checkpoint never names a step whose trajectories are still queued
    save_checkpoint(st.run_dir, step, export_model(st.model), st.tok, state, keep=st.cfg.rl.keep_checkpoints)


def after_step(st: RLState, row: dict, warn: Callable[[str], None], stop: Callable[[int, dict], bool] | None,
               budget_s: float | None, t_start: float) -> bool:
    """After step st.step - 1 (both loops): new learning warnings once each; True when the stop
    hook or the wall-clock budget ends the run."""
    from posttrain.train.run_health import WINDOW, learning_warnings

    if len(st.history) % WINDOW == 0 or st.step == st.cfg.rl.steps:
        for kind, text in learning_warnings(st.history).items():
            if kind not in st.warnings:
                st.warnings[kind] = text
                warn(text)
    return (stop is not None and stop(st.step - 1, row)) or (budget_s is not None and
                                                            time.perf_counter() - t_start >= budget_s)


async def train_rl(st: RLState, on_step: Callable[[int, dict], None] | None = None,
                   stop: Callable[[int, dict], bool] | None = None, budget_s: float | None = None,
                   on_warning: Callable[[str], None] | None = None) -> RLState:
    """Run steps st.step .. cfg.rl.steps-1. Checkpoints every `checkpoint_every` and at the end.

    `stop(step, row)` returning True ends the run after that step (a benchmark's target, an
    early stop); `budget_s` ends it once the loop has run that many seconds. Either way the
    last step is checkpointed, as at the normal end. `on_warning` receives each warning of
    run_health.learning_warnings once (default: printed to stderr) and st.warnings keeps them."""
    cfg = st.cfg.rl
    if cfg.max_staleness > 0:  # rollouts run ahead of the update (train/async_rl/); K = 0 stays on this loop
        return await registry("rl_loop").get("async")(st, on_step, stop, budget_s, on_warning)
    last_done = st.step - 1
    t_start = time.perf_counter()
    warn = on_warning or (lambda w: print(f"posttrain: warning: {w}", file=sys.stderr))
    try:
        while st.step < cfg.steps:
            row = await rl_step(st)
            if cfg.eval_every and (st.step + 1) % cfg.eval_every == 0:
                res = await run_eval(st)
                row.update({f"eval/pass@1/{d}": v for d, v in res.by_domain().items()})
                row["eval/pass@1"] = res.mean_over_domains()
            if st.cfg.log.detect_every and (st.step + 1) % st.cfg.log.detect_every == 0:
                from posttrain.eval.detectors.live import detector_metrics  # detect/<name> metrics, warnings

                row.update(detector_metrics(st, row))
            st.metrics.log(st.step, row)
            st.history.append(row)
            last_done = st.step
            if on_step is not None:
                on_step(st.step, row)
            if cfg.checkpoint_every and (st.step + 1) % cfg.checkpoint_every == 0:
                save(st, st.step)
            st.step += 1
            if after_step(st, row, warn, stop, budget_s, t_start):
                break
    except (KeyboardInterrupt, asyncio.CancelledError, InfraErrorRateExceeded):  # Ctrl-C: a cancellation under asyncio.run
        if last_done >= 0:
            save(st, last_done)
        raise
    except NonFiniteLoss as e:  # weights may be half-updated: keep the last good checkpoint, write nothing
        kept = latest_checkpoint(st.run_dir)
        raise NonFiniteLoss(f"RL step {st.step}: {e}; run stopped, last good checkpoint kept: {kept or 'none yet'}") from None
    if last_done >= 0 and latest_checkpoint(st.run_dir) != st.run_dir / "checkpoints" / f"step-{last_done}":
        save(st, last_done)
    return st
