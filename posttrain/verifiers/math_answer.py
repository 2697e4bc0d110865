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

import math
import re
from fractions import Fraction

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

_BOXED = re.compile(r"\\(?:boxed|fbox)\{")
_HASHES = re.compile(r"####\s*([^\n]+)")
_PHRASE = re.compile(r"answer\s*(?:is|=|:)\s*([^\n]+)", re.IGNORECASE)
_FRAC = re.compile(r"\\[dt]?frac\{\s*([^{}]+?)\s*\}\{\s*([^{}]+?)\s*\}")
MAX_EXPONENT = 400  # |e| beyond this is not an answer (float's range ends near 1e308)
MAX_TOKEN_CHARS = 1000  # nor is a number of more digits
_EXPONENT = re.compile(r"[eE][-+]?(\d+)")
_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*/\s*[-+]?\d+(?:\.\d*)?)?%?")


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


def parse_numeric(span: str, percent_as_fraction: bool = True) -> Fraction | None:
    """The first number in `span` after normalisation, as an exact Fraction; else None."""
    s = _FRAC.sub(lambda m: f"{m.group(1)}/{m.group(2)}", span)
    s = s.replace("\\%", "%").replace("$", "").replace("\\,", "").replace("{,}", "")
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # thousands separators
    s = s.replace("\u2212", "-")
    m = _NUM.search(s)
    if not m:
        return None
    tok = m.group(0).replace(" ", "")
    pct = tok.endswith("%")
    tok = tok.rstrip("%")
    if not _in_range(tok):
        return None
    try:
        if "/" in tok:
            num, den = tok.split("/")
            value = Fraction(num) / Fraction(den)
        else:
            value = Fraction(tok)
    except (ValueError, ZeroDivisionError):
        return None
    return value / 100 if pct and percent_as_fraction else value


def _in_range(tok: str) -> bool:
    """False for a token whose exact value would be huge to build: Fraction("7e9999999999")
    computes 10**9999999999 and never returns, so a model that writes such a number would
    hang the verifier (seen in RL on garbage samples). Answers never need such exponents."""
    if len(tok) > MAX_TOKEN_CHARS:
        return False
    return all(int(e) <= MAX_EXPONENT for e in _EXPONENT.findall(tok))


def last_number(text: str) -> Fraction | None:
    """Fallback when no marked answer exists: the last number in the text."""
    found = list(_NUM.finditer(re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)))
    return parse_numeric(found[-1].group(0)) if found else None


def extract_answer(text: str, percent_as_fraction: bool = True) -> Fraction | None:
    span = final_answer_text(text)
    if span is text:
        return last_number(text)
    return parse_numeric(span, percent_as_fraction)


def close(got: Fraction, expected: Fraction, rel_tol: float, abs_tol: float) -> bool:
    if got == expected:
        return True
    try:
        return math.isclose(float(got), float(expected), rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:  # beyond float range (|x| > 1.8e308) and not exactly equal
        return False


@verifier("math_answer")
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
