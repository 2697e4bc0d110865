"""Captured proxy calls -> one multi-turn trajectory, and its verdict (external.py).

    turns, chained = build_turns(tok, task, episode_capture)

Turn i is the i-th call's completion, ids and logprobs exactly as the engine returned
them (trainable); between two chained calls a masked turn holds the ids the next prompt
added after them (tool output, user text, chat framing), sliced from that prompt's ids,
so prompt_ids + all turns' ids is, token for token, the last call's prompt plus its
completion. A reply is parsed against the task's own tools (`Turn.tool_call`), which is
what tool_use verification re-executes; a reply whose opening tool_choice forced is parsed
with that opening in front (`CapturedCall.prefix`: its ids end the call's prompt ids, so
they sit in the trajectory's prompt or the masked turn before the reply, and the turn's
text and ids are only what the model sampled). Calls after a re-rendered one are not chained.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from posttrain.types import Task, Trajectory, Turn, VerifyResult


def chained(calls: Sequence[Any]) -> int:
    """How many leading calls extend each other exactly (ids reused verbatim)."""
    if not calls:
        return 0
    n = 1
    while n < len(calls):
        prev, c = calls[n - 1], calls[n]
        if c.rerendered or c.reused_tokens != len(prev.prompt_ids) + len(prev.completion_ids):
            break
        n += 1
    return n


def build_turns(tok: Any, task: Task, ep: Any) -> tuple[list[Turn], int]:
    from posttrain.rollout.agent.toolcall import ToolCallError, parse_tool_call
    from posttrain.rollout.agent.tools import tools_for_task

    schemas = {n: t.schema for n, t in tools_for_task(task).items()}
    skip = {i for i in (tok.eos_token_id, tok.pad_token_id) if i is not None}
    n = chained(ep.calls)
    turns: list[Turn] = []
    for i in range(n):
        c = ep.calls[i]
        text = tok.decode([t for t in c.completion_ids if t not in skip], skip_special_tokens=False)
        call = None
        if c.finish_reason == "stop":
            try:
                call = parse_tool_call(c.prefix + text, schemas)
            except ToolCallError:
                call = None
        turns.append(Turn("assistant", text, c.completion_ids, c.logprobs, True, call, None, c.wall_s))
        if i + 1 < n:
            obs = ep.calls[i + 1].prompt_ids[len(c.prompt_ids) + len(c.completion_ids):]
            result = next((r for after, _, _, r in ep.executions if after == i + 1), None)
            turns.append(Turn("tool", tok.decode(list(obs), skip_special_tokens=False), tuple(obs), (), False, None,
                              result, 0.0))
    return turns, n


async def verify_episode(runner: Any, task: Task, traj: Trajectory, max_steps: int, sandbox: Any, session: Any,
                         timeout_s: float) -> VerifyResult:
    """The native agent loop's verdict rule: the episode format check, then the task's verifier."""
    from posttrain.verifiers.base import VerifyContext
    from posttrain.verifiers.rules import episode_format_violation

    bad = episode_format_violation(task, traj, max_steps)
    if bad is not None:
        return VerifyResult.fail(bad, rule="format")
    res = VerifyResult.infra("not run")
    ctx = VerifyContext(sandbox=sandbox, session=session)
    for _ in range(runner.retries + 1):
        try:
            res = await asyncio.wait_for(runner.verifier_for(task)(task, traj, ctx), timeout_s)
        except asyncio.TimeoutError:
            res = VerifyResult.infra(f"verifier timed out after {timeout_s}s")
        except Exception as e:  # noqa: BLE001  a verifier bug is an infra error, not the model's fault
            res = VerifyResult.infra(f"verifier raised {type(e).__name__}: {e}")
        if res.status == "ok":
            break
    return res
