"""Structured-extraction verifiers: `json_schema` (format gate) and `field_match` (partial credit).

The answer is the JSON object in the final message (a ```json fence or the outermost
`{...}` are accepted). `json_schema` scores 1 when it parses and validates against the
schema (`jsonschema`, Draft 2020-12), else 0 with the validator's message. `field_match`
flattens expected and given objects into leaf paths (`items[1].qty`) and scores the share
of expected leaves that match: strings compared case- and whitespace-insensitively,
numbers within `abs_tol`/`rel_tol`, booleans and nulls exactly. Extra keys cost nothing
(the schema gate decides whether they are allowed).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult, thaw
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """The JSON value in `text`; raises ValueError with the reason when there is none."""
    fenced = _FENCE.findall(text)
    candidates = [fenced[-1]] if fenced else []
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    candidates.append(text)
    err = "empty answer"
    for c in candidates:
        if not c.strip():
            continue
        try:
            return json.loads(c)
        except json.JSONDecodeError as e:
            err = f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}"
    raise ValueError(err)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(obj, (list, tuple)):
        out = {}
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: obj}


def leaf_match(expected: Any, got: Any, abs_tol: float, rel_tol: float) -> bool:
    if isinstance(expected, bool) or expected is None:
        return got is expected  # True/False/None are singletons; 1 is not True here
    if isinstance(expected, (int, float)):
        if isinstance(got, str):
            try:
                got = float(got.replace(",", "").replace("$", "").strip())
            except ValueError:
                return False
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return False
        return math.isclose(float(got), float(expected), abs_tol=abs_tol, rel_tol=rel_tol)
    if isinstance(expected, str):
        return isinstance(got, str) and " ".join(got.split()).casefold() == " ".join(expected.split()).casefold()
    return bool(expected == got)


@verifier("json_schema", answer_format="text")
class JsonSchema:
    def __init__(self, schema: Mapping[str, Any]) -> None:
        import jsonschema

        self.schema = thaw(schema)
        try:
            self.validator = jsonschema.Draft202012Validator(self.schema)
            jsonschema.Draft202012Validator.check_schema(self.schema)
        except jsonschema.SchemaError as e:
            from posttrain.errors import ConfigError

            raise ConfigError(f"json_schema verifier: invalid schema: {e.message}") from None

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        import jsonschema

        try:
            obj = parse_json_answer(final_text(trajectory))
        except ValueError as e:
            return VerifyResult.fail(str(e))
        err = jsonschema.exceptions.best_match(self.validator.iter_errors(obj))
        if err is not None:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            return VerifyResult.fail(f"schema: {where}: {err.message}"[:300])
        return VerifyResult(1.0, True, {"valid": True})


@verifier("field_match", answer_format="text")
class FieldMatch:
    def __init__(self, expected: Mapping[str, Any], abs_tol: float = 0.005, rel_tol: float = 0.0) -> None:
        self.expected = flatten(thaw(expected))
        self.abs_tol, self.rel_tol = abs_tol, rel_tol

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        try:
            got = flatten(parse_json_answer(final_text(trajectory)))
        except ValueError as e:
            return VerifyResult.fail(str(e))
        wrong = [k for k, v in self.expected.items() if not (k in got and leaf_match(v, got[k], self.abs_tol, self.rel_tol))]
        score = 1.0 - len(wrong) / len(self.expected) if self.expected else 1.0
        return VerifyResult(score, not wrong, {"fields": len(self.expected), "wrong_fields": wrong[:20]})
