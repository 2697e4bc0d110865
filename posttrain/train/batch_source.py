"""Where the RL loop's scored trajectories come from: a `BatchSource`.

    src = SyncBatchSource()                   # or AsyncBatchSource(k) (train/async_rl/source.py)
    src.start(st)
    batch = await src.next(st)                # this step's scored groups, observed by the scheduler
    ... update ...
    sync_row = src.sync(st)                   # the new weights to the engine (now, or for the producer)
    row.update(src.after_update(st, batch, row))
    res = await src.on_engine(st, fn)         # held-out eval on the engine, wherever it runs
    extra = src.checkpoint_state(st)          # what a checkpoint must hold to resume exactly
    await src.close(st)

The synchronous source generates and scores each step's batch when the loop asks, with the
weights of the previous update. With `rl.refill_rounds` = R > 0 it refills the batch (DAPO
dynamic sampling, schedule/filtering.fill_batch): groups whose rewards are all equal carry no
gradient, so up to R further rounds of fresh prompts replace them until `prompts_per_step`
groups carry signal; the extra rollouts are counted in the row (refill/*). R = 0 keeps one
round, as before. The asynchronous source (rollouts running ahead of the update by at most
rl.max_staleness versions) lives in train/async_rl/source.py, the long-tail source (slow tasks
in their own queue, rl.longtail) in train/longtail_source.py.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence

from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.entry import rollout_options, rollout_scored
from posttrain.types import Task, Trajectory


@dataclass
class ScoredBatch:
    """One step's samples, scored and observed by the scheduler."""

    trajs: list[Trajectory]  # every sample generated for the step (all stored)
    groups: list[list[Trajectory]]  # every group, one per prompt drawn
    train_groups: list[list[Trajectory]]  # the groups the update trains on (schedule.filter_groups kept them)
    t_start: float  # perf_counter times: the step's start, generation end, verification end
    t_gen: float
    t_ver: float
    version: int = 0  # the weights version that generated it (the oldest, per sample)
    correction: Any = None  # an off-policy correction for update_policy (async), else None
    lr_scale: float = 1.0  # this update's lr multiplier (async: from the samples' staleness)
    metrics: dict[str, float] = field(default_factory=dict)  # the source's own keys (refill/*, async/*)


class BatchSource(Protocol):
    """The RL loop's supply of scored trajectories and the engine's weights schedule."""

    def start(self, st: Any) -> None: ...
    async def next(self, st: Any) -> ScoredBatch: ...
    def sync(self, st: Any) -> dict[str, float]: ...
    def after_update(self, st: Any, batch: ScoredBatch, row: dict[str, float]) -> dict[str, float]: ...
    async def on_engine(self, st: Any, fn: Callable[[], Awaitable[Any]]) -> Any: ...
    async def drain(self, st: Any) -> None: ...
    def checkpoint_state(self, st: Any) -> dict[str, Any]: ...
    async def close(self, st: Any) -> None: ...


def sampling_params(st: Any, step: int) -> SamplingParams:
    """The rollout's sampling parameters for `step`: the seed is a pure function of (seed, step)."""
    cfg = st.cfg.rl
    return SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                          n=cfg.group_size, seed=st.cfg.seed * 100_003 + step)


async def rollout_batch(st: Any, tasks: Sequence[Task], step: int, params: SamplingParams | None = None
                        ) -> tuple[list[Trajectory], float, float]:
    """Generate and score `tasks` for `step` on st.engine: (trajs, generation end, verification end),
    both perf_counter times. The producer of every source; one-step and multi-step tasks alike go
    through the rollout entry (rollout/entry.py), which scores them all."""
    params = params or sampling_params(st, step)
    marks: list[float] = []
    trajs = await rollout_scored(st.engine, st.tok, tasks, rollout_options(params, st.cfg.agent, step, st.agent_proxy),
                                 st.runner,
                                 on_generated=lambda _: marks.append(time.perf_counter()))
    return trajs, marks[0], time.perf_counter()


def group_by_task(trajs: Sequence[Trajectory]) -> list[list[Trajectory]]:
    groups: dict[int, list[Trajectory]] = {}
    for t in trajs:
        groups.setdefault(t.group, []).append(t)
    return [groups[g] for g in sorted(groups)]


def observe(st: Any, trajs: list[Trajectory]) -> tuple[list[list[Trajectory]], list[list[Trajectory]]]:
    """The infra-error guard and the scheduler see `trajs`: (all groups, the groups kept for training)."""
    if st.infra_guard is not None:
        st.infra_guard.observe(trajs)  # rl.infra_error: warn loudly or stop, never carry on silently
    groups = group_by_task(trajs)
    st.scheduler.observe(groups)
    keep = st.scheduler.filter_groups(groups)
    return groups, [g for g, k in zip(groups, keep) if k]


class StepwiseSource:
    """The parts of a `BatchSource` whose engine sits idle between steps (the synchronous and the
    long-tail sources): the new weights go to the engine right after each update, held-out eval
    runs on it directly, and nothing is left to drain or checkpoint. Subclasses supply `next`."""

    def start(self, st: Any) -> None:
        pass

    def sync(self, st: Any) -> dict[str, float]:
        return st.trainer.push_weights(st.engine, st.version)

    def after_update(self, st: Any, batch: ScoredBatch, row: dict[str, float]) -> dict[str, float]:
        return {}

    async def on_engine(self, st: Any, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await fn()

    async def drain(self, st: Any) -> None:
        pass

    def checkpoint_state(self, st: Any) -> dict[str, Any]:
        return {}

    async def close(self, st: Any) -> None:
        pass


class SyncBatchSource(StepwiseSource):
    """Generate, score and observe each step's batch when asked, with the newest weights."""

    async def next(self, st: Any) -> ScoredBatch:
        t0 = time.perf_counter()
        n = st.cfg.rl.prompts_per_step
        if st.cfg.rl.refill_rounds > 0:
            return await self._refilled(st, n, t0)
        trajs, t_gen, t_ver = await rollout_batch(st, st.scheduler.next_batch(n), st.step)
        groups, train = observe(st, trajs)
        return ScoredBatch(trajs, groups, train, t0, t_gen, t_ver, st.version)

    async def _refilled(self, st: Any, n: int, t0: float) -> ScoredBatch:
        """fill_batch: rounds of fresh prompts until n groups carry signal, at most 1 + refill_rounds.
        Each round is sampled with its own seed; group ids are renumbered so that rounds never merge."""
        from posttrain.schedule.filtering import fill_batch

        trajs: list[Trajectory] = []
        groups: list[list[Trajectory]] = []
        times = {"gen": 0.0, "ver": 0.0}

        async def one_round(tasks: list[Task]) -> list[list[Trajectory]]:
            params = dataclasses.replace(sampling_params(st, st.step), seed=sampling_params(st, st.step).seed
                                         + 7919 * len(groups))
            t1 = time.perf_counter()
            got, t_gen, t_ver = await rollout_batch(st, tasks, st.step, params)
            times["gen"] += t_gen - t1
            times["ver"] += t_ver - t_gen
            got = [dataclasses.replace(t, group=t.group + len(groups)) for t in got]
            if st.infra_guard is not None:
                st.infra_guard.observe(got)
            new = group_by_task(got)
            trajs.extend(got)
            groups.extend(new)
            return new

        res = await fill_batch(st.scheduler, n, one_round, max_rounds=1 + st.cfg.rl.refill_rounds)
        metrics = {"refill/rounds": res.rounds, "refill/prompts_drawn": res.drawn,
                   "refill/extra_prompts": max(0, res.drawn - n),
                   "refill/extra_rollouts": max(0, len(trajs) - n * st.cfg.rl.group_size),
                   "refill/dropped_groups": res.dropped, "refill/short": res.short}
        t_gen = t0 + times["gen"]
        return ScoredBatch(trajs, groups, res.groups, t0, t_gen, t_gen + times["ver"], st.version, metrics=metrics)

