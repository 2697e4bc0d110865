"""Action plans: the oracle (and wrong answers) of multi-step domains, and their replay.

A plan is a JSON list of steps, each `{"tool": NAME, "arguments": {...}}` or
`{"answer": TEXT}` (the final message). `replay(task, text, sandbox)` turns a plan, or a
plain single-turn answer, into the `Trajectory` an agent would have produced: one
assistant turn per tool call (with `tool_call` set), one masked tool-observation turn
per result, and a final assistant answer. Shell steps run in a live sandbox session,
which the caller keeps open for the verifier (final-state checks).

This is the soundness driver (`posttrain tasks check`), not the agent loop: it never
calls a model, and it stops at the task's `max_steps` like the agent loop would.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from posttrain.types import Task, ToolCall, Trajectory, Turn


class PlanError(ValueError):
    pass


def parse_plan(text: str) -> list[dict[str, Any]]:
    """Steps of a plan; an empty text is the empty plan."""
    if not text.strip():
        return []
    try:
        steps = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"plan is not JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(steps, list):
        raise PlanError("plan must be a JSON list of steps")
    for i, s in enumerate(steps):
        if not isinstance(s, Mapping) or not (("tool" in s and isinstance(s.get("arguments", {}), Mapping)) or "answer" in s):
            raise PlanError(f"plan step {i}: expected {{tool, arguments}} or {{answer}}")
    return steps


def dump_plan(steps: list[dict[str, Any]]) -> str:
    return json.dumps(steps, separators=(",", ":"))


def is_plan_task(task: Task) -> bool:
    """Multi-step tasks name their tools in the environment."""
    return bool(task.environment.tools)


def _traj(task: Task, turns: list[Turn]) -> Trajectory:
    return Trajectory(task_id=task.id, task_version=task.version, domain=task.domain, prompt_ids=(), turns=tuple(turns), finish_reason="stop")


def answer_trajectory(task: Task, text: str) -> Trajectory:
    """A single-turn answer (`""` is the empty answer: no turns at all)."""
    return _traj(task, [Turn("assistant", text)] if text else [])


async def replay(task: Task, text: str, session: Any = None) -> Trajectory:
    """The trajectory of `text` (a plan for tool tasks, else an answer) on `task`."""
    if not is_plan_task(task):
        return answer_trajectory(task, text)
    from posttrain.tasks.tools_impl import ToolError, call_tool, init_state

    state = init_state(task)
    if session is not None:
        state["session"] = session
        state["shell_timeout_s"] = min(10.0, task.limits.timeout_s)
    turns: list[Turn] = []
    for i, step in enumerate(parse_plan(text)):
        if sum(t.role == "assistant" for t in turns) >= task.limits.max_steps:
            break
        if "answer" in step:
            turns.append(Turn("assistant", str(step["answer"])))
            break
        call = ToolCall(str(step["tool"]), dict(step.get("arguments", {})), id=f"call{i}")
        turns.append(Turn("assistant", json.dumps({"tool": call.name, "arguments": step.get("arguments", {})}), tool_call=call))
        n_exec = len(state.get("exec_results", []))
        try:
            obs = await call_tool(call.name, call.arguments, state)
        except ToolError as e:
            obs = f"error: {e}"
        execs = state.get("exec_results", [])
        turns.append(Turn("tool", obs, trainable=False, exec_result=execs[-1] if len(execs) > n_exec else None))
    return _traj(task, turns)


async def rerun_calls(task: Task, trajectory: Trajectory) -> tuple[dict[str, Any], list[tuple[ToolCall, bool, str]]]:
    """Re-execute a trajectory's tool calls on fresh state (never trust its observations).

    For in-process tools only (calculator, lookup, convert, scene); returns the final
    state and `(call, ok, output)` per call, in order.
    """
    from posttrain.tasks.tools_impl import ToolError, call_tool, init_state

    state = init_state(task)
    out = []
    for t in trajectory.turns:
        if t.role != "assistant" or t.tool_call is None:
            continue
        if t.tool_call.name == "shell":
            out.append((t.tool_call, False, "shell is not replayable in-process"))
            continue
        try:
            out.append((t.tool_call, True, await call_tool(t.tool_call.name, t.tool_call.arguments, state)))
        except ToolError as e:
            out.append((t.tool_call, False, str(e)))
    return state, out
