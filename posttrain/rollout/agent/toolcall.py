"""The strict tool-call parser: one JSON call inside the chat template's tool-call markers.

    <tool_call>{"name": "calculator", "arguments": {"expression": "4821*937"}}</tool_call>

This is the OpenAI / Hugging Face convention (Hermes, Qwen, the tiny model's template):
`name` plus an `arguments` object (a JSON string holding an object is accepted too, as
the OpenAI API sends it). `parse_tool_call(text, schemas)` returns:

- `None` when the reply holds no marker at all: a plain reply, the episode's final answer;
- a `ToolCall` when there is exactly one well-formed call to a known tool whose
  arguments validate against its JSON Schema;
- otherwise it raises `ToolCallError` whose `reason` says why, one of `REASONS`. The
  agent loop shows the message to the model as the observation (it counts as a step).

Strict means: one call per reply, nothing but whitespace after the closing marker, no
extra keys beside `name`/`arguments`/`id`. Text before the opening marker is allowed
(models often think aloud first). Not supported: several parallel calls in one reply.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from posttrain.types import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
REASONS = ("unterminated", "multiple_calls", "trailing_text", "not_json", "bad_shape", "unknown_tool", "bad_arguments")


class ToolCallError(ValueError):
    """A malformed tool call; `reason` is one of REASONS, the message names the problem."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


_VALIDATORS: dict[str, Any] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    import jsonschema

    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:  # building a validator checks the schema itself: once per schema
        _VALIDATORS[key] = jsonschema.Draft202012Validator(dict(schema))
    return _VALIDATORS[key]


def check_arguments(name: str, arguments: Any, schema: Mapping[str, Any]) -> None:
    """Raise ToolCallError("bad_arguments") when `arguments` does not match `schema`."""
    import jsonschema

    err = jsonschema.exceptions.best_match(_validator(schema).iter_errors(arguments))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        raise ToolCallError("bad_arguments", f"{name}: bad argument {where}: {err.message}")


def _extract(text: str) -> str | None:
    """The JSON body between the markers, or None for a plain reply."""
    start = text.find(OPEN)
    if start < 0:
        if CLOSE in text:
            raise ToolCallError("unterminated", f"found {CLOSE} without an opening {OPEN}")
        return None
    end = text.find(CLOSE, start)
    if end < 0:
        raise ToolCallError("unterminated", f"{OPEN} is never closed by {CLOSE}")
    rest = text[end + len(CLOSE):]
    if OPEN in rest:
        raise ToolCallError("multiple_calls", "one tool call per step: found a second <tool_call>")
    if rest.strip():
        raise ToolCallError("trailing_text", f"text after {CLOSE}: {rest.strip()[:40]!r}")
    return text[start + len(OPEN):end]


def _decode(body: str) -> tuple[str, Any, str]:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise ToolCallError("not_json", f"tool call is not JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(obj, dict):
        raise ToolCallError("bad_shape", f"tool call must be a JSON object, got {type(obj).__name__}")
    extra = sorted(set(obj) - {"name", "arguments", "id"})
    if extra:
        raise ToolCallError("bad_shape", f"tool call has unexpected keys {extra}; expected name and arguments")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ToolCallError("bad_shape", "tool call needs a string 'name'")
    args = obj.get("arguments", {})
    if isinstance(args, str):  # the OpenAI API's wire form: arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError as e:
            raise ToolCallError("not_json", f"{name}: arguments string is not JSON: {e.msg}") from None
    if not isinstance(args, dict):
        raise ToolCallError("bad_shape", f"{name}: 'arguments' must be an object, got {type(args).__name__}")
    return name, args, str(obj.get("id", ""))


def parse_tool_call(text: str, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall | None:
    """Parse one reply against the episode's tools (`name -> JSON Schema of arguments`)."""
    body = _extract(text)
    if body is None:
        return None
    name, args, call_id = _decode(body)
    if name not in schemas:
        raise ToolCallError("unknown_tool", f"unknown tool {name!r}; available: {', '.join(sorted(schemas))}")
    check_arguments(name, args, schemas[name])
    return ToolCall(name, args, id=call_id)


def format_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The canonical text of a call (what SFT demonstrations teach the model to emit)."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, separators=(",", ":"), ensure_ascii=False)
    return f"{OPEN}{body}{CLOSE}"
