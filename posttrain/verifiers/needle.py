"""`needle`: the 7-digit values named in the answer against the expected values.

score = recall * precision over distinct 7-digit numbers in the final answer:
naming a distractor value, or padding the answer with every number in the haystack,
costs precision. Order does not matter.
"""

from __future__ import annotations

import re
from typing import Sequence

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

_VAL = re.compile(r"(?<!\d)\d{7}(?!\d)")


@verifier("needle", answer_format="line")
class NeedleVerifier:
    def __init__(self, values: Sequence[int | str]) -> None:
        self.values = {str(v) for v in values}

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        named = set(_VAL.findall(re.sub(r"(?<=\d),(?=\d{3})", "", final_text(trajectory))))  # 1,234,567 -> 1234567
        if not named:
            return VerifyResult.fail("no 7-digit value in the answer")
        hit = named & self.values
        recall, precision = len(hit) / len(self.values), len(hit) / len(named)
        return VerifyResult(recall * precision, recall == 1.0 and precision == 1.0,
                            {"recall": recall, "precision": precision, "missing": sorted(self.values - named), "extra": sorted(named - self.values)})
