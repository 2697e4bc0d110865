"""`text_match`: the final answer equals an expected string after normalisation.

The answer is the `\\boxed{}` / `#### X` / `answer: X` span when present (see
`math_answer.final_answer_text`), else the whole final message; both sides are
case-folded, whitespace-collapsed and stripped of surrounding punctuation and quotes.
For imported rows whose ground truth is not a number.
"""

from __future__ import annotations

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_answer_text, final_text


def normalise(s: str) -> str:
    return " ".join(s.split()).strip(" .,;:!?\"'`").casefold()


@verifier("text_match", answer_format="line")
class TextMatch:
    def __init__(self, expected: str) -> None:
        self.expected = normalise(str(expected))

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        got = normalise(final_answer_text(final_text(trajectory)))
        if not got:
            return VerifyResult.fail("empty answer")
        ok = got == self.expected
        return VerifyResult(float(ok), ok, {"got": got[:80], "expected": self.expected[:80]})
