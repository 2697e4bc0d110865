"""`scene_match`: the final scene graph against the task's target.

The verifier rebuilds the scene by re-running the trajectory's scene tool calls on an
empty graph (it never trusts observations), then compares it with
`task.metadata["target_scene"]`: every target object's shape, transform, material and
parent must agree within `tol` (positions, scales, colours) or `angle_tol` degrees;
extra objects count against the score. Each wrong tool call (one that raised) costs
`wrong_call_penalty` of the score.
"""

from __future__ import annotations

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult, thaw
from posttrain.verifiers.base import VerifyContext


@verifier("scene_match", answer_format="line")
class SceneMatch:
    def __init__(self, tol: float = 1e-3, angle_tol: float = 0.5, wrong_call_penalty: float = 0.1) -> None:
        self.tol, self.angle_tol, self.penalty = tol, angle_tol, wrong_call_penalty

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        from posttrain.tasks.plan import rerun_calls
        from posttrain.tasks.scene_api import SceneGraph, compare_scenes

        if "target_scene" not in task.metadata:
            return VerifyResult.fail("task has no metadata.target_scene")
        state, calls = await rerun_calls(task, trajectory)
        cmp = compare_scenes(SceneGraph.from_json(thaw(task.metadata["target_scene"])), state["scene"], self.tol, self.angle_tol)
        wrong = sum(1 for _, ok, _ in calls if not ok)
        score = max(0.0, cmp["fraction"] * (1.0 - self.penalty * wrong))
        ok = cmp["fraction"] == 1.0 and wrong == 0
        return VerifyResult(score, ok, {**cmp, "wrong_calls": wrong, "calls": len(calls)})
