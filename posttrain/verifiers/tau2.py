"""`tau2`: the reward of a τ²-bench episode, from the final database state and the required outputs.

    Spec("tau2", {"domain": "airline", "task_id": "12"})            # what tasks/tau2.py puts on each task
    Spec("tau2", {"domain": "mock", "task_id": "create_task_1", "judge_nl": True})  # + NL assertions
    Spec("tau2", {"domain": "airline", "task_id": "0", "guard": True})   # doing nothing earns nothing

The verifier trusts nothing the agent wrote about the state. It replays the agent's recorded
tool calls (the `tool_call` of each assistant turn, in order) into a fresh copy of the task's
starting database, then computes each part of τ²'s reward that the task's `reward_basis` names:

- DB: tau2's database hash after the replay equals the hash after the gold actions;
- COMMUNICATE: every `communicate_info` string appears in the agent's plain-text messages
  (tau2's rule: case-insensitive, commas dropped);
- ENV_ASSERTION: every `env_assertions` check holds on the replayed database;
- ACTION: every gold action is matched by a call (name, and the arguments in `compare_args`);
- NL_ASSERTION (and with `judge_nl` for any task that has them): each natural-language
  assertion is put to the `judge` model (verifiers/judge.py, rubric mode, over the agent's
  messages); a judge failure is an infrastructure error, not a score.

The reward is the product of the parts, as in tau2. With `guard` (what the domains put on their
tasks unless `reward: official`), a task whose reward an episode that does nothing would earn
also needs SPOKE and GOLD_CALLS, and its NL assertions when `judge_nl` (tasks/tau2_guard.py).
An agent that said nothing fails every NL assertion without a judge call. Calls to anything but the domain's agent
tools do nothing (tasks/tau2_env.py), so no sequence of calls can reach the hash by another road.
"""

from __future__ import annotations

import asyncio
from typing import Any

from posttrain.registry import build, verifier
from posttrain.tasks.tau2_env import Tau2Env, gold_hash, tau2_tasks
from posttrain.tasks.tau2_guard import calls_made, check_guardable, guard_of
from posttrain.types import Message, Spec, Task, Trajectory, Turn, VerifyResult, thaw
from posttrain.verifiers.base import VerifyContext


def agent_calls(traj: Trajectory) -> list[tuple[str, dict[str, Any]]]:
    return [(t.tool_call.name, thaw(t.tool_call.arguments)) for t in traj.turns
            if t.role == "assistant" and t.tool_call is not None]


def agent_messages(traj: Trajectory) -> list[str]:
    return [t.text for t in traj.turns if t.role == "assistant" and t.tool_call is None]


def replay(domain: str, task_id: str, calls: list[tuple[str, dict[str, Any]]]) -> Tau2Env:
    env = Tau2Env.fresh(domain, task_id)
    for name, args in calls:
        env.call(name, args)
    return env


def _action_matched(action: Any, calls: list[tuple[str, dict[str, Any]]]) -> bool:
    keys = action.compare_args
    for name, args in calls:
        if name != action.name:
            continue
        ks = args.keys() if keys is None else keys
        if {k: v for k, v in args.items() if k in ks} == {k: v for k, v in action.arguments.items() if k in ks}:
            return True
    return False


@verifier("tau2", answer_format="line")  # multi-step episodes: the step budget decides (rules.py)
class Tau2Verifier:
    def __init__(self, domain: str, task_id: str, judge_nl: bool = False, judge_model: str = "judge",
                 guard: bool = False) -> None:
        if task_id not in tau2_tasks(domain):
            raise ValueError(f"tau2 {domain}: no task {task_id!r}")
        self.domain, self.task_id, self.judge_nl, self.judge_model, self.guard = domain, task_id, judge_nl, judge_model, guard
        if guard:
            check_guardable(domain, task_id, judged=judge_nl)
        self.crit = tau2_tasks(domain)[task_id].evaluation_criteria

    def _state_parts(self, traj: Trajectory) -> dict[str, float]:
        """DB, ENV_ASSERTION, ACTION, COMMUNICATE parts (blocking: runs in a thread)."""
        calls = agent_calls(traj)
        env = replay(self.domain, self.task_id, calls)
        gold_agent, gold_user = gold_hash(self.domain, self.task_id)
        said = [m.lower().replace(",", "") for m in agent_messages(traj)]
        return {
            "DB": float(env.db_hash() == gold_agent and env.user_db_hash() == gold_user),
            "ENV_ASSERTION": float(all(env.env_assertion(a) for a in self.crit.env_assertions or [])),
            "ACTION": float(all(_action_matched(a, calls) for a in self.crit.actions or [])),
            "COMMUNICATE": float(all(any(info.lower() in m for m in said) for info in self.crit.communicate_info or [])),
        }

    async def _nl_part(self, task: Task, traj: Trajectory, ctx: VerifyContext) -> VerifyResult:
        """All NL assertions hold, per the judge over the agent's messages (1.0 when there are none)."""
        said = "\n".join(m for m in agent_messages(traj) if m.strip())
        if not said and self.crit.nl_assertions:  # nothing said: no assertion about the agent's messages can hold
            return VerifyResult(0.0, False, reason="the agent sent no message: no NL assertion can hold")
        for assertion in self.crit.nl_assertions or []:
            judge = build(Spec("judge", {"model": self.judge_model, "mode": "rubric", "rubric": assertion}),
                          kind="verifier")
            q = Task(task.id, task.domain, (Message("user", "Did the customer-service agent's messages satisfy the rubric?"),),
                     Spec("judge"))
            r = await judge(q, Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", said),)), ctx)
            if r.status != "ok" or not r.passed:
                return r
        return VerifyResult(1.0, True)

    def _guard_parts(self, traj: Trajectory) -> dict[str, float]:
        """SPOKE and GOLD_CALLS on a task an episode that does nothing would pass (empty elsewhere)."""
        g = guard_of(self.domain, self.task_id)
        if not (self.guard and g.null_rewarded):
            return {}
        parts = {"SPOKE": float(any(m.strip() for m in agent_messages(traj)))}
        if g.calls:
            parts["GOLD_CALLS"] = float(calls_made(g.calls, agent_calls(traj)))
        return parts

    async def __call__(self, task: Task, traj: Trajectory, ctx: VerifyContext) -> VerifyResult:
        if self.crit is None:
            return VerifyResult(1.0, True, {"note": "task has no evaluation criteria"})
        parts = await asyncio.to_thread(self._state_parts, traj)
        guard = self._guard_parts(traj)
        parts |= guard
        basis = sorted({b.value for b in self.crit.reward_basis} | set(guard))
        judged = self.judge_nl and (not self.guard or bool(guard))  # guarded: the judge only where the guard is needed
        if "NL_ASSERTION" in basis or (judged and self.crit.nl_assertions):
            basis = sorted(set(basis) | {"NL_ASSERTION"})
            if any(parts[b] < 1.0 for b in basis if b != "NL_ASSERTION"):
                parts["NL_ASSERTION"] = 0.0  # the reward is 0 already: no judge call spent on it
            else:
                nl = await self._nl_part(task, traj, ctx)
                if nl.status != "ok":
                    return nl
                parts["NL_ASSERTION"] = nl.score
        reward = 1.0
        for b in basis:
            reward *= parts[b]
        failed = [b for b in basis if parts[b] < 1.0]
        return VerifyResult(reward, reward == 1.0, {"parts": {b: parts[b] for b in basis}, "calls": len(agent_calls(traj))},
                            reason=f"failed: {', '.join(failed)}" if failed else "")
