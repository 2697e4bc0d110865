"""The guard on τ²'s reward for training: an episode that does nothing must not earn it.

τ²-bench scores an episode by the parts its `reward_basis` names. On the tasks whose right
behaviour changes nothing (refuse a cancellation the policy forbids, transfer to a human) and
that require no output, an agent that stays silent earns the full reward: airline 19 of 50,
retail 7 of 114, mock 1 of 9 (benchmarks/tau2_bench.py gold). For published pass^1 figures that
is τ²'s reward and stays so (`reward: official`); RL would learn silence from it. On such a
task (`null_rewarded`) the guarded reward also needs:

- SPOKE: at least one plain-text message to the customer;
- GOLD_CALLS: every call of the gold run that the tools accepted, made by the agent (name and
  arguments; free-text arguments such as a transfer's `summary` are not compared), e.g. the
  lookups of the user and the reservation that deciding to refuse takes;
- with a judge (`judge_nl`): the task's natural-language assertions, judged over the agent's messages.

A null-rewarded task with none of these to check is not guardable: the domain leaves it out of
the pool and the verifier refuses to build on it (`check_guardable`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from posttrain.tasks.tau2_env import Tau2Env, gold_run, tau2_tasks

FREE_TEXT_ARGS = frozenset({"summary"})  # transfer_to_human_agents(summary): prose, never the same twice


@dataclasses.dataclass(frozen=True)
class Guard:
    null_rewarded: bool  # an episode with no call and no message earns τ²'s reward
    calls: tuple[tuple[str, str], ...]  # GOLD_CALLS: (name, JSON of the compared arguments)
    nl_assertions: tuple[str, ...]

    def guardable(self, judged: bool) -> bool:
        return not self.null_rewarded or bool(self.calls) or (judged and bool(self.nl_assertions))


def _compared(args_json: str) -> str:
    return json.dumps({k: v for k, v in json.loads(args_json).items() if k not in FREE_TEXT_ARGS}, sort_keys=True)


@functools.lru_cache(maxsize=1024)
def guard_of(domain: str, task_id: str) -> Guard:
    """What the guard checks on one task (a replay of its gold run on first use; cached)."""
    crit = tau2_tasks(domain)[task_id].evaluation_criteria
    if crit is None:  # the verifier scores such a task 1.0 whatever happens
        return Guard(True, (), ())
    basis = {b.value for b in crit.reward_basis}
    nl = tuple(crit.nl_assertions or ())
    static_zero = (("COMMUNICATE" in basis and bool(crit.communicate_info)) or ("ACTION" in basis and bool(crit.actions))
                   or ("NL_ASSERTION" in basis and bool(nl)))
    if static_zero:  # an empty episode already fails a part: no replay needed
        return Guard(False, (), nl)
    run = gold_run(domain, task_id)
    calls = tuple((name, _compared(args)) for name, args in run.accepted)
    null = ("DB" not in basis or run.start == run.end) and (
        "ENV_ASSERTION" not in basis or all(Tau2Env.fresh(domain, task_id).env_assertion(a) for a in crit.env_assertions or []))
    return Guard(null, calls, nl)


def check_guardable(domain: str, task_id: str, judged: bool) -> None:
    if not guard_of(domain, task_id).guardable(judged):
        hint = "" if judged or not guard_of(domain, task_id).nl_assertions else " or name a judge (judge: ROLE)"
        raise ValueError(f"tau2 {domain} task {task_id!r}: an agent that does nothing earns τ²'s reward and the task has "
                         f"no accepted gold call{' or judged assertion' if judged else ''} to tell doing the job from doing "
                         f"nothing; leave it out of training (the domain's pool does), score it with reward: official{hint}")


def calls_made(required: tuple[tuple[str, str], ...], calls: list[tuple[str, dict[str, Any]]]) -> bool:
    made = {(name, _compared(json.dumps(args, sort_keys=True, default=str))) for name, args in calls}
    return all(c in made for c in required)
