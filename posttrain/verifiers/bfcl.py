"""`bfcl`: a reply's function calls checked against BFCL's allowed argument values.

    Spec("bfcl", {"category": "parallel", "functions": [...], "ground_truth": [...]})

The reading of the reply and the check are `posttrain.tasks.bfcl_judge` (see its docstring:
three strict reply forms, BFCL's AST rules, a stricter irrelevance rule). Binary reward.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from posttrain.registry import verifier
from posttrain.tasks.bfcl_judge import CallParseError, format_call, is_plain_reply, judge, parse_calls  # noqa: F401
from posttrain.types import Task, Trajectory, VerifyResult, thaw
from posttrain.verifiers.base import VerifyContext


@verifier("bfcl", answer_format="line")
class Bfcl:
    def __init__(self, category: str, functions: Sequence[Mapping[str, Any]],
                 ground_truth: Sequence[Mapping[str, Any]] = ()) -> None:
        self.category = str(category)
        self.functions = thaw(functions)  # plain dicts and lists once, not per answer
        self.ground_truth = thaw(ground_truth)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        passed, details = judge(trajectory.completion_text, self.category, self.functions, self.ground_truth)
        details = {"category": self.category, **details}
        if passed:
            return VerifyResult(1.0, True, details)
        return VerifyResult.fail(str(details.get("error_type", "wrong")), **details)
