"""`cited_answer`: the answer value is right AND the completion cites the right source.

    Spec("cited_answer", {"answer": "4417", "cite": "D3"})

Score 1.0 when the completion states the answer (as a whole number or word, case-insensitive:
"200" is not read inside "1,200" or "200.5") and cites exactly the gold source id(s) in brackets
(`[D3]`); `partial` (default 0.3) when the value is right but the citation is missing or wrong;
0 otherwise. `others`: the values the losing sources give; an answer that names any of them
scores 0 (hedging "980 or 1,200 [D2]" would otherwise collect the value whichever source wins).
Limits: the value must appear verbatim (no unit conversion or paraphrase).
"""

from __future__ import annotations

import re

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

_BRACKET = re.compile(r"\[\s*([A-Za-z]*\d+)(?::\d+-\d+)?\s*\]")


@verifier("cited_answer", answer_format="text")
class CitedAnswer:
    def __init__(self, answer: str, cite: str | list[str], partial: float = 0.3, others: list[str] = ()) -> None:
        self.answer = str(answer).strip().lower()
        self.cite = {cite} if isinstance(cite, str) else set(cite)
        self.partial = partial
        self.others = [str(o).strip().lower() for o in others if str(o).strip().lower() != self.answer]

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        text = trajectory.completion_text
        body = _BRACKET.sub(" ", text).lower()
        has_value = names(body, self.answer)
        hedged = [o for o in self.others if names(body, o)]
        cites = set(_BRACKET.findall(text))
        cited_ok = cites == self.cite
        score = 0.0 if hedged else 1.0 if has_value and cited_ok else self.partial if has_value else 0.0
        return VerifyResult(score, score == 1.0, {"value_ok": has_value, "cites": sorted(cites), "expected": sorted(self.cite),
                                                  **({"names_losing_values": hedged} if hedged else {})})


def names(text: str, value: str) -> bool:
    """`value` occurs in `text` as a whole token: not inside a longer word or number ("200" in "1,200",
    "12" in "12.5", "-3"), a sentence's full stop after it allowed."""
    return re.search(r"(?<![\w.,-])" + re.escape(value) + r"(?![\w-]|[.,]\d)", text) is not None
