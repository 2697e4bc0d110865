"""Answers with citations: `labelled_answer` (the value) and `citations` (precision/recall).

The expected answer format is two lines:

    ANSWER: <value>
    CITATIONS: [d2], [d5]

`labelled_answer` compares the ANSWER value with `expected` (case/space-insensitive;
numbers within `rel_tol`). `citations` scores the F1 of the cited document ids against
`supporting`, and reports precision and recall in details. Both read the final message.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

_ANSWER = re.compile(r"^\s*ANSWER\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_CITES = re.compile(r"^\s*CITATIONS?\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_ID = re.compile(r"\b(d\d+)\b", re.IGNORECASE)


def _norm(s: str) -> str:
    return " ".join(s.strip().strip(".").split()).casefold()


def _as_number(s: str) -> float | None:
    try:
        return float(s.replace(",", "").replace("$", ""))
    except ValueError:
        return None


@verifier("labelled_answer", answer_format="text")
class LabelledAnswer:
    def __init__(self, expected: str, rel_tol: float = 1e-6) -> None:
        self.expected, self.rel_tol = str(expected), rel_tol

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        found = _ANSWER.findall(final_text(trajectory))
        if not found:
            return VerifyResult.fail("no 'ANSWER:' line")
        got = found[-1]
        a, b = _as_number(got), _as_number(self.expected)
        ok = math.isclose(a, b, rel_tol=self.rel_tol) if a is not None and b is not None else _norm(got) == _norm(self.expected)
        return VerifyResult(float(ok), ok, {"got": got[:80], "expected": self.expected})


@verifier("citations", answer_format="text")
class Citations:
    def __init__(self, supporting: Sequence[str]) -> None:
        self.supporting = {s.lower() for s in supporting}

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        lines = _CITES.findall(final_text(trajectory))
        cited = {c.lower() for c in _ID.findall(lines[-1])} if lines else set()
        if not cited:
            return VerifyResult.fail("no citations", precision=0.0, recall=0.0)
        hit = cited & self.supporting
        p, r = len(hit) / len(cited), len(hit) / len(self.supporting)
        f1 = 2 * p * r / (p + r) if hit else 0.0
        return VerifyResult(f1, p == 1.0 and r == 1.0, {"precision": p, "recall": r, "cited": sorted(cited)})
