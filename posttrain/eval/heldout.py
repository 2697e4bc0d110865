"""Held-out evaluation used inside training runs: greedy pass@1 per domain, paired.

    res = await evaluate_heldout(engine, tokenizer, tasks, runner, max_new_tokens=12)
    cmp = paired_mcnemar(before, after)     # exact McNemar over the same tasks

This is the quick in-loop form (one greedy sample per task, same verifiers as
training). `posttrain eval` (runner.py) is the full harness with suites, epochs,
resume and caching. Both take their samples from the rollout entry (multi-step tasks
as greedy agent episodes) and judge and pool them with the same evaluation core
(eval/core.py: `verdict`, `mean_pass_at_k`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from posttrain.eval.core import mean_pass_at_k, run_scored, verdict
from posttrain.eval.stats import mcnemar_exact
from posttrain.rollout.agent.loop import AgentOptions
from posttrain.rollout.engine import Engine, SamplingParams
from posttrain.rollout.entry import RolloutOptions, agent_options
from posttrain.types import Task, Trajectory


@dataclass
class HeldoutResult:
    passed: dict[str, bool]  # task id -> passed (infra errors excluded)
    domain_of: dict[str, str]
    trajectories: list[Trajectory] = field(default_factory=list)
    infra_errors: int = 0

    def pass_at_1(self, domain: str | None = None) -> float:
        """Mean over the domain's judged tasks of pass@1 (eval/core.py, as the suite runner pools it)."""
        by_task = {tid: (1, int(p)) for tid, p in self.passed.items()
                   if domain is None or self.domain_of[tid] == domain}
        return mean_pass_at_k(by_task, 1)[0]

    def by_domain(self) -> dict[str, float]:
        return {d: self.pass_at_1(d) for d in sorted(set(self.domain_of.values()))}

    def mean_over_domains(self) -> float:
        vals = list(self.by_domain().values())
        return sum(vals) / len(vals) if vals else float("nan")


async def evaluate_heldout(engine: Engine, tokenizer: Any, tasks: Sequence[Task], runner: Any,
                           max_new_tokens: int = 24, step: int = 0, temperature: float = 0.0,
                           seed: int = 0, agent_cfg: Any = None) -> HeldoutResult:
    """One sample per task: greedy at temperature 0, else sampled with a fixed seed (pass@1).
    Multi-step tasks run as greedy agent episodes (budgets and shaping from `agent_cfg`, the run
    config's `agent` section), through the same rollout entry as one-step tasks."""
    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, n=1,
                            seed=seed if temperature > 0 else None)
    # episodes stay greedy whatever `temperature` is, and run the built-in loop (never agent.external)
    agent = agent_options(SamplingParams(temperature=0.0, n=1), agent_cfg) if agent_cfg is not None \
        else AgentOptions(temperature=0.0)
    trajs = await run_scored(engine, tokenizer, tasks, RolloutOptions(params, agent, step=step), runner)
    passed, infra = {}, 0
    for t in trajs:
        v = verdict(t)
        if v.infra:
            infra += 1
            continue
        passed[t.task_id] = v.passed
    return HeldoutResult(passed, {t.id: t.domain for t in tasks}, trajs, infra)


@dataclass
class PairedResult:
    n: int
    before_only: int  # passed before, failed after
    after_only: int  # failed before, passed after
    p_value: float


def paired_mcnemar(before: HeldoutResult, after: HeldoutResult, domain: str | None = None) -> PairedResult:
    common = [tid for tid in before.passed if tid in after.passed
              and (domain is None or before.domain_of[tid] == domain)]
    b = sum(before.passed[t] and not after.passed[t] for t in common)
    c = sum(after.passed[t] and not before.passed[t] for t in common)
    return PairedResult(len(common), b, c, mcnemar_exact(b, c))


async def evaluate_heldout_mixed(engine: Any, tok: Any, tasks: Sequence[Task], runner: Any, max_new_tokens: int = 24,
                                 step: int = 0, agent_cfg: Any = None, temperature: float = 0.0,
                                 seed: int = 0) -> HeldoutResult:
    """`evaluate_heldout` with the run config's `agent` section (the RL loop's and recipes' call)."""
    return await evaluate_heldout(engine, tok, tasks, runner, max_new_tokens, step, temperature, seed, agent_cfg)
