"""RL batches that mix single-turn and multi-step tasks.

    trajs = await rollout_mixed(engine, tok, tasks, params, cfg.agent, runner, step)

Tasks with `limits.max_steps > 1` run as agent episodes (`agent.py`, scored inside the
episode while its sandbox session is open); with `agent.external` set they run that agent process through
the token-capturing proxy instead (`external.py`); the others take the single-turn path and
the runner's `verify_all`. Either way `trajs[i].group` is the task's index in `tasks`
and samples of one group are contiguous, so group-relative advantages work unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.engine import SamplingParams
from posttrain.types import Task, Trajectory


def agent_options(params: SamplingParams, agent_cfg: Any, concurrency: int | None = None) -> AgentOptions:
    """AgentOptions from the RL sampling parameters and the run config's `agent` section."""
    return AgentOptions(
        n=params.n, temperature=params.temperature, top_p=params.top_p, seed=params.seed,
        time_budget_s=agent_cfg.time_budget_s or None, token_budget=agent_cfg.token_budget or None,
        obs_max_chars=agent_cfg.obs_max_chars, concurrency=concurrency or agent_cfg.concurrency,
        retries=agent_cfg.retries, step_weight=agent_cfg.step_weight, malformed_penalty=agent_cfg.malformed_penalty)


async def rollout_mixed(engine: Any, tok: Any, tasks: Sequence[Task], params: SamplingParams, agent_cfg: Any,
                        runner: Any, step: int = 0) -> list[Trajectory]:
    from posttrain.rollout.single_turn import rollout_single_turn

    multi = [i for i, t in enumerate(tasks) if t.limits.max_steps > 1]
    single = [i for i, t in enumerate(tasks) if t.limits.max_steps <= 1]
    by_group: dict[int, list[Trajectory]] = {}
    ext = getattr(agent_cfg, "external", None)
    if multi and ext is not None:  # an external agent process per episode, through the proxy
        from posttrain.rollout.agent.external import ExternalAgent, rollout_external

        spec = ExternalAgent(ext.command, ext.entry, ext.timeout_s, ext.max_calls, dict(ext.env))
        trajs = await rollout_external(engine, tok, [tasks[i] for i in multi], agent_options(params, agent_cfg), spec,
                                       sandbox=runner.ctx.sandbox, verifier_runner=runner, step=step)
        for t in trajs:
            by_group.setdefault(multi[t.group], []).append(dataclasses.replace(t, group=multi[t.group]))
    elif multi:
        trajs = await rollout_agent(engine, tok, [tasks[i] for i in multi], agent_options(params, agent_cfg),
                                    sandbox=runner.ctx.sandbox, verifier_runner=runner, step=step)
        for t in trajs:
            by_group.setdefault(multi[t.group], []).append(dataclasses.replace(t, group=multi[t.group]))
    if single:
        sub = [tasks[i] for i in single]
        trajs = await rollout_single_turn(engine, tok, sub, params, step=step)
        trajs = await runner.verify_all({t.id: t for t in sub}, trajs)
        for t in trajs:
            by_group.setdefault(single[t.group], []).append(dataclasses.replace(t, group=single[t.group]))
    return [t for g in sorted(by_group) for t in by_group[g]]
