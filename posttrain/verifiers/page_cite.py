"""Answers that cite printed pages, checked against the cited page's own text.

    `page_cited` (xref): the answer names a value and cites pages as "[p. 68]".
    score = 1 only when: the value matches the expected one (a page label, or a short phrase
    compared word for word), the answer is short (copying a page is not an answer), exactly
    the evidence pages are cited (citing every page, or one that does not hold the answer,
    scores 0), and every cited page's text, as extracted from the PDF, holds the answer.

The verifier gets the texts of the pages shown in the prompt (`pages`: label -> text), so a
citation is checked against the source page, never against the model's own quote.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

CITE = re.compile(r"\[\s*(?:p|pp|page)\.?\s*([0-9ivxlcdmIVXLCDM]+(?:-\d+)?)\s*\]", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:[._'][a-z0-9]+)*")
MAX_ANSWER_CHARS = 300


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def split_citations(answer: str) -> tuple[str, list[str]]:
    """(the answer without its citations, the cited page labels in order)."""
    return CITE.sub(" ", answer).strip(), [m.group(1) for m in CITE.finditer(answer)]


def holds(page_text: str, value: Sequence[str]) -> bool:
    """Whether the page's words contain `value` (a word sequence) contiguously."""
    pw, n = words(page_text), len(value)
    return n > 0 and any(pw[i : i + n] == list(value) for i in range(len(pw) - n + 1))


@verifier("page_cited", answer_format="line")
class PageCited:
    def __init__(self, expected: str, evidence: Sequence[str], pages: Mapping[str, str], kind: str = "phrase") -> None:
        self.expected, self.evidence, self.pages, self.kind = str(expected), {str(e) for e in evidence}, dict(pages), kind

    def _value_ok(self, body: str) -> bool:
        if self.kind == "label":  # a page-location answer: the one page label named
            named = set(re.findall(r"\b[0-9]+\b|\b[ivxlcdm]+\b", body.lower()))
            return named == {self.expected.lower()}
        return words(body) == words(self.expected)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        text = final_text(trajectory).strip()
        body, cited = split_citations(text)
        info = {"cited": cited, "evidence": sorted(self.evidence)}
        if not body:
            return VerifyResult.fail("empty answer", **info)
        if len(text) > MAX_ANSWER_CHARS:
            return VerifyResult(0.0, False, {**info, "reason": f"answer of {len(text)} chars: longer than {MAX_ANSWER_CHARS}"})
        if set(cited) != self.evidence:
            return VerifyResult(0.0, False, {**info, "reason": "cites pages other than the evidence" if cited else "no page citation"})
        unheld = [c for c in cited if c not in self.pages or (self.kind == "phrase" and not holds(self.pages[c], words(self.expected)))]
        if unheld:  # checked against the page's own extracted text
            return VerifyResult(0.0, False, {**info, "reason": f"cited page does not hold the answer: {unheld}"})
        ok = self._value_ok(body)
        return VerifyResult(1.0 if ok else 0.0, ok, {**info, "reason": "" if ok else "wrong value"})
