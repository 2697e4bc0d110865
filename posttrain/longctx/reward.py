"""`cited_answer`: the answer value is right AND the completion cites the right source.

    Spec("cited_answer", {"answer": "4417", "cite": "D3"})

Score 1.0 when the completion states the answer (as a whole token, case-insensitive)
and cites exactly the gold source id(s) in brackets (`[D3]`); `partial` (default 0.3)
when the value is right but the citation is missing or wrong; 0 otherwise. Limits: the
value must appear verbatim (no unit conversion or paraphrase).
"""

from __future__ import annotations

import re

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

_BRACKET = re.compile(r"\[\s*([A-Za-z]*\d+)(?::\d+-\d+)?\s*\]")


@verifier("cited_answer", answer_format="text")
class CitedAnswer:
    def __init__(self, answer: str, cite: str | list[str], partial: float = 0.3) -> None:
        self.answer = str(answer).strip().lower()
        self.cite = {cite} if isinstance(cite, str) else set(cite)
        self.partial = partial

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        text = trajectory.completion_text
        body = _BRACKET.sub(" ", text).lower()
        has_value = re.search(r"(?<![\w-])" + re.escape(self.answer) + r"(?![\w-])", body) is not None
        cites = set(_BRACKET.findall(text))
        cited_ok = cites == self.cite
        score = 1.0 if has_value and cited_ok else self.partial if has_value else 0.0
        return VerifyResult(score, score == 1.0, {"value_ok": has_value, "cites": sorted(cites), "expected": sorted(self.cite)})
