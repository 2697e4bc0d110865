"""Agent evaluation: greedy completion and the steps an agent takes, before vs after training.

    res = await agent_eval(engine, tok, held)          # completion rate, tool use, steps on solved
    steps = await sampled_steps(engine, tok, held, k=4, temperature=1.0, seed=0)
    change = steps_change(steps_before, steps_after)   # paired by task, bootstrap + sign test

Used by benchmarks/agent_bench.py's headline (RL on the `tools` domain).
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence


async def _scored(engine: Any, tok: Any, tasks: Sequence[Any], n: int, temperature: float, seed: int | None
                  ) -> list[Any]:
    """`n` scored episodes per task through the rollout entry (eval/core.py), default agent options."""
    from posttrain.eval.core import run_scored
    from posttrain.rollout.engine import SamplingParams
    from posttrain.rollout.entry import rollout_options

    opts = rollout_options(SamplingParams(temperature=temperature, n=n, seed=seed))
    return await run_scored(engine, tok, tasks, opts, None)


async def agent_eval(engine: Any, tok: Any, tasks: Sequence[Any]) -> dict[str, Any]:
    from posttrain.rollout.agent.tasks import rereads

    trajs = await _scored(engine, tok, tasks, n=1, temperature=0.0, seed=None)
    passed = {t.task_id: bool(t.verify and t.verify.passed) for t in trajs if not t.infra_error}
    solved_steps = [t.num_steps for t in trajs if t.verify and t.verify.passed]
    calls = [t for t in trajs if any(x.tool_call is not None and x.tool_call.name == "calculator" for x in t.turns)]
    return {"passed": passed, "rate": sum(passed.values()) / max(1, len(passed)), "steps_solved": statistics.mean(solved_steps) if solved_steps else float("nan"),
            "tool_rate": len(calls) / max(1, len(trajs)),
            "pass_given_tool": sum(bool(t.verify and t.verify.passed) for t in calls) / max(1, len(calls)),
            "reread": sum(rereads(t) for t in trajs) / max(1, len(trajs)),
            "malformed": sum(t.verify.details.get("agent", {}).get("malformed", 0) for t in trajs if t.verify),
            "example": [x.text for x in trajs[0].turns]}


async def sampled_steps(engine: Any, tok: Any, tasks: Sequence[Any], k: int, temperature: float, seed: int
                        ) -> dict[str, list[int]]:
    """Steps of each solved episode, per task, over `k` sampled episodes per task at `temperature`
    (the policy as RL samples it; greedy decoding hides a habit taken on fewer than half the
    samples)."""
    trajs = await _scored(engine, tok, tasks, n=k, temperature=temperature, seed=seed)
    out: dict[str, list[int]] = {t.id: [] for t in tasks}
    for t in trajs:
        if t.verify and t.verify.passed and not t.infra_error:
            out[t.task_id].append(t.num_steps)
    return out


def steps_change(before: dict[str, list[int]], after: dict[str, list[int]]) -> dict[str, Any]:
    """Average steps on solved sampled episodes, before vs after, paired by task: one pair per
    task solved in at least one sample both times (the task's mean steps), with a task-cluster
    bootstrap of the mean difference and an exact sign test over the tasks whose mean moved."""
    from posttrain.eval.stats import mcnemar_exact, paired_bootstrap

    both = [k for k in before if before[k] and after.get(k)]
    b = [statistics.mean(before[k]) for k in both]
    a = [statistics.mean(after[k]) for k in both]
    boot = paired_bootstrap(b, a, both, seed=0)
    flat_b = [s for k in before for s in before[k]]
    flat_a = [s for k in after for s in after[k]]
    fell, rose = sum(y < x for x, y in zip(b, a)), sum(y > x for x, y in zip(b, a))
    return {"tasks": len(both), "before": statistics.mean(b) if b else float("nan"),
            "fell": fell, "rose": rose, "sign_p": mcnemar_exact(rose, fell), "resamples": boot.resamples,
            "after": statistics.mean(a) if a else float("nan"), "delta": boot.interval.estimate,
            "low": boot.interval.low, "high": boot.interval.high, "p": boot.p_value,
            "episodes": [len(flat_b), len(flat_a)],
            "over_min": [sum(s > 2 for s in flat_b) / max(1, len(flat_b)), sum(s > 2 for s in flat_a) / max(1, len(flat_a))]}
