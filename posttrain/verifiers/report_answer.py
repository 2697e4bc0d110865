"""`report_answer`: an AA-LCR short answer, checked as its reference allows (see tasks/documents/report_qa.py)."""

from __future__ import annotations

import re

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
_WORD = re.compile(r"[a-z0-9]+")
MAX_TEXT_CHARS = 120


def _numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def _close(a: float, b: float, rel: float = 0.01) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


@verifier("report_answer", answer_format="line")
class ReportAnswer:
    def __init__(self, answer: str, kind: str = "text") -> None:
        self.answer, self.kind = answer, kind

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        text = final_text(trajectory).strip()
        if not text:
            return VerifyResult.fail("empty answer")
        if len(text) > MAX_TEXT_CHARS:
            return VerifyResult.fail(f"answer of {len(text)} chars is longer than {MAX_TEXT_CHARS}")
        if self.kind == "numeric":
            want, got = _numbers(self.answer), _numbers(text)
            if len(got) > len(want) + 1:
                return VerifyResult.fail(f"names {len(got)} numbers where the answer has {len(want)}")
            ok = all(any(_close(w, g) for g in got) for w in want)
        else:
            ww, gw = _WORD.findall(self.answer.lower()), _WORD.findall(text.lower())
            ok = any(gw[i : i + len(ww)] == ww for i in range(len(gw) - len(ww) + 1)) and len(gw) <= len(ww) + 8
        return VerifyResult(1.0 if ok else 0.0, ok, {"kind": self.kind})
