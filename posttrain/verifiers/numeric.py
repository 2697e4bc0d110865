"""`exact_numeric`: the answer is one number, equal to the task's within a tolerance."""

from __future__ import annotations

import math
import re

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def parse_number(text: str) -> float | None:
    """A single number, allowing surrounding spaces and thousands separators; else None."""
    s = text.strip().replace(",", "")
    if not _NUMBER.match(s):
        return None
    value = float(s)
    return value if math.isfinite(value) else None


@verifier("exact_numeric", answer_format="line")
class ExactNumeric:
    def __init__(self, answer: float, rel_tol: float = 0.0, abs_tol: float = 1e-9) -> None:
        self.answer = float(answer)
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        got = parse_number(trajectory.completion_text)
        if got is None:
            return VerifyResult.fail("not a number", answer=trajectory.completion_text[:80])
        ok = math.isclose(got, self.answer, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        return VerifyResult(1.0 if ok else 0.0, ok, {"got": got, "expected": self.answer})
