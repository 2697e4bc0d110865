"""Verifiers for questions about images (chart, ui, drawing domains).

- `visual_choice`  the answer is one option of a small set (a label, an id, up/down);
                   an answer outside the set fails with reason "not an option".
- `visual_number`  one number within `tol` of the true value (a chart value, a dimension).
- `point_in_box`   a click point "x,y" (image pixels) inside the control's box [x0, y0, x1, y1].

The model's whole final message is the answer (normalised like `text_match`); these
verifiers never look at the image, only at the ground truth the generator recorded.
"""

from __future__ import annotations

import math
import re

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.numeric import parse_number
from posttrain.verifiers.text_match import normalise

_POINT = re.compile(r"^\(?\s*(-?\d+(?:\.\d+)?)\s*[, ]\s*(-?\d+(?:\.\d+)?)\s*\)?$")


@verifier("visual_choice", answer_format="line")
class VisualChoice:
    def __init__(self, answer: str, options: list[str]) -> None:
        self.answer = normalise(str(answer))
        self.options = {normalise(str(o)) for o in options}
        if self.answer not in self.options:
            raise ValueError(f"visual_choice: answer {answer!r} is not among options {sorted(self.options)}")

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        got = normalise(trajectory.completion_text)
        if not got:
            return VerifyResult.fail("empty answer")
        if got not in self.options:
            return VerifyResult.fail("not an option", got=got[:40], options=sorted(self.options))
        ok = got == self.answer
        return VerifyResult(float(ok), ok, {"got": got, "expected": self.answer})


@verifier("visual_number", answer_format="line")
class VisualNumber:
    def __init__(self, answer: float, tol: float = 0.0) -> None:
        self.answer, self.tol = float(answer), float(tol)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        got = parse_number(trajectory.completion_text)
        if got is None:
            return VerifyResult.fail("not a number", answer=trajectory.completion_text[:40])
        ok = abs(got - self.answer) <= self.tol + 1e-9
        return VerifyResult(float(ok), ok, {"got": got, "expected": self.answer, "tol": self.tol})


@verifier("point_in_box", answer_format="line")
class PointInBox:
    def __init__(self, box: list[float]) -> None:
        if len(box) != 4 or not box[0] <= box[2] or not box[1] <= box[3]:
            raise ValueError(f"point_in_box: box must be [x0, y0, x1, y1] with x0<=x1, y0<=y1, got {box}")
        self.box = [float(v) for v in box]

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        m = _POINT.match(trajectory.completion_text.strip())
        if m is None:
            return VerifyResult.fail("not a point x,y", answer=trajectory.completion_text[:40])
        x, y = float(m.group(1)), float(m.group(2))
        if not (math.isfinite(x) and math.isfinite(y)):
            return VerifyResult.fail("not a finite point")
        x0, y0, x1, y1 = self.box
        ok = x0 <= x <= x1 and y0 <= y <= y1
        return VerifyResult(float(ok), ok, {"got": [x, y], "box": self.box})
