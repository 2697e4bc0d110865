"""`image_test`: a Harbor-format task's tests, run in its image on the episode's final workspace.

The tests (`tests/test.sh` and its helpers) travel in the verifier's spec, never in the
episode: the candidate cannot read or edit them. They run after the episode, in a new
sandbox on a pristine overlay of the task's image, with a copy of the final workspace at
the image's WORKDIR, the tests read-only at /tests and a fresh /logs/verifier (see
`sandbox/image_tests.py`). The reward is the number in /logs/verifier/reward.txt,
clipped to [0, 1]; a missing or non-numeric reward is 0. A candidate whose workspace is
not a rootfs session's (e.g. an `ExecSession`) gets an infra error, not a score.
"""

from __future__ import annotations

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext


@verifier("image_test", answer_format="line")  # multi-step episodes: the step budget decides (rules.py)
class ImageTest:
    def __init__(self, tests: dict[str, str], wall_s: float = 60.0) -> None:
        self.tests, self.wall_s = dict(tests), float(wall_s)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        from posttrain.sandbox import images
        from posttrain.sandbox.image_tests import run_image_tests
        from posttrain.sandbox.session import ShellSession

        if not isinstance(ctx.session, ShellSession):
            return VerifyResult.infra("image_test needs the episode's native sandbox session (a rootfs-image session)")
        try:
            img = images.resolve(task.environment.image)
            res, raw = await run_image_tests(img, ctx.session.workspace_dir, self.tests, self.wall_s)
        except Exception as e:  # noqa: BLE001  the machinery failed: no judgement possible
            return VerifyResult.infra(f"test phase failed: {type(e).__name__}: {e}")
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error in the test phase: {res.error}")
        details = {"test_status": res.status, "test_tail": (res.stdout + res.stderr)[-400:]}
        if raw is None:
            return VerifyResult(0.0, False, {**details, "reason": "the tests wrote no /logs/verifier/reward.txt"})
        try:
            reward = min(1.0, max(0.0, float(raw.strip())))
        except ValueError:
            return VerifyResult(0.0, False, {**details, "reason": f"reward.txt is not a number: {raw[:40]!r}"})
        return VerifyResult(reward, reward >= 1.0, details)
