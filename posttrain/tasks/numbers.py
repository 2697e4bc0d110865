"""Numbers as answers are written: parsed to exact Fractions, compared within a tolerance.

Shared by the domains that generate numeric answers (math_problems, trl_rows) and the
`math_answer` verifier that checks them. `3/4`, `\\frac{3}{4}`, `75%` (= 0.75 when
`percent_as_fraction`), scientific notation and `1,234.5` all parse.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_FRAC = re.compile(r"\\[dt]?frac\{\s*([^{}]+?)\s*\}\{\s*([^{}]+?)\s*\}")
MAX_EXPONENT = 400  # |e| beyond this is not an answer (float's range ends near 1e308)
MAX_TOKEN_CHARS = 1000  # nor is a number of more digits
_EXPONENT = re.compile(r"[eE][-+]?(\d+)")
_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*/\s*[-+]?\d+(?:\.\d*)?)?%?")


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


def close(got: Fraction, expected: Fraction, rel_tol: float, abs_tol: float) -> bool:
    if got == expected:
        return True
    try:
        return math.isclose(float(got), float(expected), rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:  # beyond float range (|x| > 1.8e308) and not exactly equal
        return False
