"""`ruler_values`: RULER needle values (7-digit numbers or UUIDs) named in the answer.

score = recall x precision over the distinct values of the needle's type in the final answer
(RULER's own `string_match_all` is recall only, which an answer listing every number of the
haystack would pass; precision closes that). An answer longer than 64 + 48 chars per value
scores 0: echoing the prompt names the needle without having found it.
"""

from __future__ import annotations

import re
from typing import Sequence

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

PATTERNS = {"numbers": re.compile(r"(?<![\d-])\d{7}(?![\d-])"),
            "uuids": re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)}


@verifier("ruler_values", answer_format="line")
class RulerValues:
    def __init__(self, values: Sequence[str], kind: str = "numbers") -> None:
        from posttrain.errors import ConfigError

        if kind not in PATTERNS:
            raise ConfigError(f"ruler_values: kind must be one of {sorted(PATTERNS)}, got {kind!r}")
        self.values, self.pattern = {str(v).lower() for v in values}, PATTERNS[kind]

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        text = final_text(trajectory)
        cap = 64 + 48 * len(self.values)  # room for the values and a sentence around them
        if len(text) > cap:  # echoing the haystack names the needle too, but reads nothing
            return VerifyResult.fail(f"answer of {len(text)} chars is longer than {cap}: not an answer")
        named = {m.lower() for m in self.pattern.findall(text)}
        if not named:
            return VerifyResult.fail("no needle value in the answer")
        hit = named & self.values
        recall, precision = len(hit) / len(self.values), len(hit) / len(named)
        return VerifyResult(recall * precision, recall == 1.0 and precision == 1.0,
                            {"recall": recall, "precision": precision, "missing": sorted(self.values - named)})
