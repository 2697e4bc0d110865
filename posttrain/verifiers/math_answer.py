"""`math_answer`: a final numeric answer, normalised, compared within a tolerance.

The final answer is taken, in order of preference, from the last `\\boxed{...}`, a
GSM8K-style `#### X` line, an `answer is X` / `answer: X` phrase, or else the last
number in the text. It is normalised before comparison: `$`, thousands separators and
trailing units are dropped; `3/4`, `\\frac{3}{4}`, `-1\\tfrac{1}{2}`-free fractions,
`75%` (= 0.75 when `percent_as_fraction`), scientific notation and `1,234.5` all parse.

Does not judge symbolic answers (expressions in `x`, intervals, sets): those need a CAS
and fail here as "no number".
"""

from __future__ import annotations

import re
from fractions import Fraction

from posttrain.registry import verifier
from posttrain.tasks.numbers import _NUM, close, parse_numeric  # noqa: F401  (close, parse_numeric re-exported)
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

_BOXED = re.compile(r"\\(?:boxed|fbox)\{")
_HASHES = re.compile(r"####\s*([^\n]+)")
_PHRASE = re.compile(r"answer\s*(?:is|=|:)\s*([^\n]+)", re.IGNORECASE)


def _last_boxed(text: str) -> str | None:
    """Contents of the last \\boxed{...}, honouring nested braces."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    i = start = starts[-1]
    depth = 1
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1] if depth == 0 else None


def final_answer_text(text: str) -> str:
    """The span of `text` holding the final answer (see module doc)."""
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed
    for rx in (_HASHES, _PHRASE):
        found = rx.findall(text)
        if found:
            return found[-1]
    return text


def last_number(text: str) -> Fraction | None:
    """Fallback when no marked answer exists: the last number in the text."""
    found = list(_NUM.finditer(re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)))
    return parse_numeric(found[-1].group(0)) if found else None


def extract_answer(text: str, percent_as_fraction: bool = True) -> Fraction | None:
    span = final_answer_text(text)
    if span is text:
        return last_number(text)
    return parse_numeric(span, percent_as_fraction)


@verifier("math_answer", answer_format="line")
class MathAnswer:
    """1.0 when the extracted final answer equals `answer` within tolerance, else 0."""

    def __init__(self, answer: str | float | int, rel_tol: float = 1e-6, abs_tol: float = 1e-9, percent_as_fraction: bool = True) -> None:
        parsed = parse_numeric(str(answer), percent_as_fraction)
        if parsed is None:
            from posttrain.errors import ConfigError

            raise ConfigError(f"math_answer: expected answer {answer!r} is not a number")
        self.answer, self.rel_tol, self.abs_tol, self.pct = parsed, rel_tol, abs_tol, percent_as_fraction

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        text = final_text(trajectory)
        got = extract_answer(text, self.pct)
        if got is None:
            return VerifyResult.fail("no number in the answer", answer=text[-80:])
        ok = close(got, self.answer, self.rel_tol, self.abs_tol)
        return VerifyResult(1.0 if ok else 0.0, ok, {"got": str(got), "expected": str(self.answer)})


def final_text(trajectory: Trajectory) -> str:
    """The last assistant turn that is not a tool call (the episode's final answer)."""
    for t in reversed(trajectory.turns):
        if t.role == "assistant" and t.tool_call is None:
            return t.text
    return ""
