"""`tool_use`: did the episode call every required tool successfully?

The trajectory's tool calls are re-executed on fresh state (observations in the
trajectory are never trusted). score = fraction of `required` tools with at least one
successful call; details count wrong calls (bad arguments, unknown tools).
"""

from __future__ import annotations

from typing import Sequence

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext


@verifier("tool_use", answer_format="line")
class ToolUse:
    def __init__(self, required: Sequence[str]) -> None:
        self.required = tuple(required)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        from posttrain.tasks.plan import rerun_calls

        _, calls = await rerun_calls(task, trajectory)
        used = {c.name for c, ok, _ in calls if ok}
        missing = [r for r in self.required if r not in used]
        score = 1.0 - len(missing) / len(self.required) if self.required else 1.0
        wrong = sum(1 for _, ok, _ in calls if not ok)
        return VerifyResult(score, not missing, {"missing_tools": missing, "calls": len(calls), "wrong_calls": wrong})
