"""The one rollout entry: tasks in, scored trajectories out, whatever kind of task.

    opts = rollout_options(params, cfg.agent, step=step)         # or RolloutOptions(params, AgentOptions(...))
    trajs = await rollout_scored(engine, tok, tasks, opts, verifier)
    assert all(t.verify is not None for t in trajs)

A single-turn task is the one-step case of an episode. This is the only place the two are
dispatched (`types.is_multi_step` says which is which): a multi-step task runs as an agent
episode (`agent/loop.py`, scored inside the episode while its sandbox session is open; with
`opts.external` set, the agent process runs through the token-capturing proxy instead,
`agent/external.py`); a multi-step task that talks to a simulated user (its metadata carries
`user_scenario`: τ²-bench, tasks/tau2.py) runs against the run's `user` model (`agent/tau2_loop.py`,
the second model opened by the recipe, models/service.py); a one-step task is generated in one
engine call (`single_turn.py`) and scored here by the verifier runner.
Either way every trajectory comes back with `.verify` and `.reward` filled, `trajs[i].group` is
the task's index in `tasks`, and the samples of one group are contiguous and in task order, so
group-relative advantages work unchanged.

Callers: the RL batch sources (train/batch_source.py, and through it the asynchronous and
long-tail sources), the held-out eval (eval/heldout.py), the suite runner's episodes and
replays (eval/runner.py, eval/episodes.py) and the agent evaluation (eval/agent_eval.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.single_turn import rollout_single_turn
from posttrain.types import Task, Trajectory, is_multi_step

if TYPE_CHECKING:
    from posttrain.rollout.agent.external import AgentProxyFactory, ExternalAgent


@dataclass(frozen=True)
class RolloutOptions:
    """How to sample: `sampling` for one-step tasks, `agent` for episodes (its n, temperature
    and seed normally equal sampling's; `rollout_options` builds both from one SamplingParams)."""

    sampling: SamplingParams
    agent: AgentOptions = field(default_factory=AgentOptions)
    external: "ExternalAgent | None" = None  # agent.external: episodes run this agent process
    proxy: "AgentProxyFactory | None" = None  # serves the engine to that process (the recipe hands it in)
    step: int = 0  # the RL step (request ids, trajectory.step)
    offload_generation: bool = False  # one-step generation on a worker thread (the event loop keeps verifying)


def agent_options(params: SamplingParams, agent_cfg: Any) -> AgentOptions:
    """AgentOptions from the sampling parameters and a run config's `agent` section (AgentConfig)."""
    return AgentOptions(
        n=params.n, temperature=params.temperature, top_p=params.top_p, seed=params.seed,
        time_budget_s=agent_cfg.time_budget_s or None, token_budget=agent_cfg.token_budget or None,
        obs_max_chars=agent_cfg.obs_max_chars, concurrency=agent_cfg.concurrency,
        retries=agent_cfg.retries, step_weight=agent_cfg.step_weight, malformed_penalty=agent_cfg.malformed_penalty,
        tools_prompt=agent_cfg.tools_prompt)


def external_agent(agent_cfg: Any) -> "ExternalAgent | None":
    """The run config's `agent.external` as the process spec the proxy runs, or None."""
    ext = agent_cfg.external
    if ext is None:
        return None
    from posttrain.rollout.agent.external import ExternalAgent

    return ExternalAgent(ext.command, ext.entry, ext.timeout_s, ext.max_calls, dict(ext.env))


def rollout_options(params: SamplingParams, agent_cfg: Any = None, step: int = 0,
                    proxy: "AgentProxyFactory | None" = None) -> RolloutOptions:
    """RolloutOptions for an RL step or an eval: episodes sample like `params`; `agent_cfg`
    (the run config's `agent` section) adds budgets, reward shaping and agent.external, whose
    process talks to the engine through `proxy` (wired by the recipe: serve/proxy_host.py)."""
    if agent_cfg is None:
        agent = AgentOptions(n=params.n, temperature=params.temperature, top_p=params.top_p, seed=params.seed)
        return RolloutOptions(params, agent, None, proxy, step)
    return RolloutOptions(params, agent_options(params, agent_cfg), external_agent(agent_cfg), proxy, step)


async def _episodes(engine: Any, tok: Any, tasks: Sequence[Task], opts: RolloutOptions, verifier: Any,
                    sandbox: Any) -> list[Trajectory]:
    """Scored episodes, trajs[g * n + k]: through the agent process when opts.external is set."""
    if opts.external is not None:
        from posttrain.rollout.agent.external import rollout_external

        if opts.proxy is None:
            raise ValueError("agent.external is set but no agent proxy was wired in: the recipe passes "
                             "serve/proxy_host.py's ServedProxy (RunContext.agent_proxy); a caller of rollout_scored "
                             "passes RolloutOptions(proxy=...)")
        return await rollout_external(engine, tok, tasks, opts.agent, opts.external, opts.proxy, sandbox=sandbox,
                                      verifier_runner=verifier, step=opts.step)
    return await rollout_agent(engine, tok, tasks, opts.agent, sandbox=sandbox, verifier_runner=verifier,
                               step=opts.step)


USER_SCENARIO = "user_scenario"  # Task.metadata key: the episode talks to a simulated user playing it


def talks_to_user(task: Task) -> bool:
    """A task whose episode is a conversation with a simulated user (τ²-bench's customer)."""
    return USER_SCENARIO in task.metadata


async def _with_user(engine: Any, tok: Any, tasks: Sequence[Task], opts: RolloutOptions, verifier: Any
                     ) -> list[Trajectory]:
    """Scored conversations, trajs[g * n + k]: the policy as the agent, the run's `user` model as the
    customer (a ConfigError naming `models.user` when the run opened none), each scored on its database."""
    from posttrain.models.service import active_service
    from posttrain.rollout.agent.tau2_loop import Tau2Options, Tau2Runner

    a = opts.agent
    t2 = Tau2Options(max_steps=max(t.limits.max_steps for t in tasks),
                     max_new_tokens=max(t.limits.max_new_tokens for t in tasks), temperature=a.temperature,
                     obs_max_chars=a.obs_max_chars, concurrency=a.concurrency, seed=a.seed)
    runner = Tau2Runner(engine, tok, active_service("user"), t2, verifier_runner=verifier, step=opts.step)
    trajs = await runner.run(tasks, a.n)  # task by task, then sample by sample
    return [dataclasses.replace(t, group=i // a.n) for i, t in enumerate(trajs)]


async def _one_step(engine: Any, tok: Any, tasks: Sequence[Task], opts: RolloutOptions) -> list[Trajectory]:
    if not opts.offload_generation:
        return await rollout_single_turn(engine, tok, tasks, opts.sampling, step=opts.step)
    import asyncio

    def generate() -> list[Trajectory]:  # engine.generate blocks: a thread with its own loop
        return asyncio.run(rollout_single_turn(engine, tok, tasks, opts.sampling, step=opts.step))

    return await asyncio.to_thread(generate)


async def rollout_scored(engine: Any, tok: Any, tasks: Sequence[Task], opts: RolloutOptions, verifier: Any = None,
                         sandbox: Any = None, on_generated: Callable[[list[Trajectory]], None] | None = None
                         ) -> list[Trajectory]:
    """Generate and score `tasks`: n samples each, every one with `.verify` filled.

    `verifier`: a VerifierRunner (None: a fresh one on `sandbox`); `sandbox`: the episodes'
    sandbox (None: the verifier's). `on_generated` is called once when generation is over,
    before the one-step samples are verified, with those samples unscored (the RL loop's
    generate/verify timing split; the suite runner's generation cache)."""
    if verifier is None:
        from posttrain.verifiers.run import VerifierRunner

        verifier = VerifierRunner(sandbox)
    sandbox = sandbox if sandbox is not None else verifier.ctx.sandbox
    users = [i for i, t in enumerate(tasks) if talks_to_user(t)]
    multi = [i for i, t in enumerate(tasks) if is_multi_step(t) and not talks_to_user(t)]
    single = [i for i, t in enumerate(tasks) if not is_multi_step(t) and not talks_to_user(t)]
    by_group: dict[int, list[Trajectory]] = {}

    def regroup(index: list[int], trajs: list[Trajectory]) -> None:
        for t in trajs:  # group ids of a sub-list back to indices in `tasks`
            by_group.setdefault(index[t.group], []).append(dataclasses.replace(t, group=index[t.group]))

    if users:
        regroup(users, await _with_user(engine, tok, [tasks[i] for i in users], opts, verifier))
    if multi:
        regroup(multi, await _episodes(engine, tok, [tasks[i] for i in multi], opts, verifier, sandbox))
    sub = [tasks[i] for i in single]
    raw = await _one_step(engine, tok, sub, opts) if sub else []
    if on_generated is not None:
        on_generated(raw)
    if sub:
        regroup(single, await verifier.verify_all({t.id: t for t in sub}, raw))
    return [t for g in sorted(by_group) for t in by_group[g]]
