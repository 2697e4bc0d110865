"""BFCL replies judged: the strict parse of a reply's function calls and BFCL's AST check.

Shared by the `bfcl` domain (its oracle and wrong answers are judged with it) and the
`bfcl` verifier (verifiers/bfcl.py), so it lives with the tasks, below the verifiers.

    Spec("bfcl", {"category": "parallel", "functions": [...], "ground_truth": [...]})

The reply is read strictly (`parse_calls`), in one of three forms, never a mix:
- the project's tool-call format (`rollout/agent/toolcall.py`): one `<tool_call>{...}</tool_call>`
  block per call, blocks separated by whitespace only, nothing after the last one (text
  before the first is allowed: models think aloud);
- one fenced JSON block (```json ... ```): a call object or a list of them, nothing after;
- bare JSON: the whole reply is a call object or a list of them.
A call object is `{"name": str, "arguments": {...}}` (`"parameters"` is accepted in place
of `"arguments"`, as Llama writes it; `"arguments"` may be a JSON string of an object, as
the OpenAI API sends it; `"id"` is ignored); any other key, a duplicate key, NaN or
Infinity, or a malformed block makes the whole reply wrong. Anything else is prose: no call.

The calls then go through `bfcl_ast.check`, BFCL's AST checker (name, required and
unknown args, types, allowed values, parallel calls in any order). Binary reward.

Irrelevance categories pass only a plain reply: no call, and nothing that looks like one
(no `<tool_call>` marker, code fence, `{` or `[`), at most `PLAIN_MAX_CHARS` characters.
BFCL itself passes any reply it cannot decode as a call; a broken call is still an
attempt to call, and a page of junk is not an answer, so this is stricter.
Values are only ever compared as parsed JSON (builtins): nothing the model wrote is run.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from posttrain.tasks.bfcl_ast import check
from posttrain.types import thaw

# The markers of rollout/agent/toolcall.py, not imported from there: importing posttrain.rollout loads
# the engines (torch), and verifiers run in light processes. A test checks they are the same.
OPEN, CLOSE = "<tool_call>", "</tool_call>"
PLAIN_MAX_CHARS = 600
MAX_CALLS = 32  # more calls than any BFCL item expects (8): refused before checking
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_CALL_KEYS = {"name", "arguments", "parameters", "id"}


class CallParseError(ValueError):
    """The reply tries to call but is malformed; `reason` names the problem."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise CallParseError("duplicate_key", f"duplicate key {k!r}")
        out[k] = v
    return out


def _bad_constant(name: str) -> Any:
    raise CallParseError("not_json", f"{name} is not JSON")


def _json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_dupes, parse_constant=_bad_constant)
    except json.JSONDecodeError as e:
        raise CallParseError("not_json", f"not JSON: {e.msg} at column {e.colno}") from None
    except (RecursionError, ValueError) as e:  # nesting, ints past Python's digit limit
        if isinstance(e, CallParseError):
            raise
        raise CallParseError("not_json", f"not JSON: {type(e).__name__}") from None


def _call(obj: Any) -> dict[str, dict[str, Any]]:
    """One call object -> `{name: arguments}` (BFCL's decoded form)."""
    if not isinstance(obj, dict):
        raise CallParseError("bad_shape", f"a call must be an object, got {type(obj).__name__}")
    extra = sorted(set(obj) - _CALL_KEYS)
    if extra:
        raise CallParseError("bad_shape", f"call has unexpected keys {extra}")
    if "arguments" in obj and "parameters" in obj:
        raise CallParseError("bad_shape", "call has both 'arguments' and 'parameters'")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise CallParseError("bad_shape", "call needs a string 'name'")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        args = _json(args)
    if not isinstance(args, dict):
        raise CallParseError("bad_shape", f"{name}: arguments must be an object")
    return {name: args}


def _calls(value: Any) -> list[dict[str, dict[str, Any]]]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise CallParseError("bad_shape", "an empty list of calls")
    if len(items) > MAX_CALLS:
        raise CallParseError("too_many_calls", f"{len(items)} calls")
    return [_call(x) for x in items]


def _tagged(text: str) -> list[dict[str, dict[str, Any]]]:
    start = text.find(OPEN)
    if start < 0:
        raise CallParseError("unterminated", f"found {CLOSE} without {OPEN}")
    if CLOSE in text[:start]:
        raise CallParseError("unterminated", f"{CLOSE} before the first {OPEN}")
    out, pos = [], start
    while pos < len(text):
        if not text.startswith(OPEN, pos):
            raise CallParseError("trailing_text", f"text between or after calls: {text[pos:pos + 40]!r}")
        end = text.find(CLOSE, pos)
        if end < 0:
            raise CallParseError("unterminated", f"{OPEN} is never closed")
        body = text[pos + len(OPEN):end]
        if OPEN in body:
            raise CallParseError("unterminated", f"{OPEN} inside a call")
        out.append(_call(_json(body)))
        if len(out) > MAX_CALLS:
            raise CallParseError("too_many_calls", f"more than {MAX_CALLS} calls")
        pos = end + len(CLOSE)
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def parse_calls(text: str) -> list[dict[str, dict[str, Any]]]:
    """The reply's calls as `[{name: args}, ...]`; `[]` for prose; CallParseError if malformed."""
    if OPEN in text or CLOSE in text:
        return _tagged(text)
    if "```" in text:
        fences = list(_FENCE.finditer(text))
        if len(fences) != 1 or text.count("```") != 2:
            raise CallParseError("bad_fence", "expected exactly one fenced JSON block")
        if text[fences[0].end():].strip():
            raise CallParseError("trailing_text", "text after the fenced block")
        return _calls(_json(fences[0].group(1)))
    body = text.strip()
    if body[:1] in ("{", "["):
        return _calls(_json(body))
    return []


def is_plain_reply(text: str) -> bool:
    """A reply with no call and nothing that looks like one (see the module doc)."""
    body = text.strip()
    return (0 < len(body) <= PLAIN_MAX_CHARS and OPEN not in body and CLOSE not in body and "```" not in body
            and "{" not in body and "[" not in body)


def format_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The canonical text of a call, as `rollout.toolcall.format_tool_call` writes it."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, separators=(",", ":"), ensure_ascii=False)
    return f"{OPEN}{body}{CLOSE}"


def judge(text: str, category: str, functions: Sequence[Mapping[str, Any]],
          ground_truth: Sequence[Mapping[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """(passed, details) for one reply (pure: what the verifier and the tests call). Frozen
    args (a Task's read-only mappings and tuples) are thawed first: the checker tells lists by type."""
    functions, ground_truth = thaw(functions), thaw(ground_truth)
    if "irrelevance" in category:
        if is_plain_reply(text):
            return True, {"calls": 0}
        try:
            n = len(parse_calls(text))
        except CallParseError as e:
            return False, {"error_type": e.reason, "error": str(e)}
        return False, {"calls": n, "error_type": "irrelevance", "error": "no function should be called"}
    try:
        calls = parse_calls(text)
    except CallParseError as e:
        return False, {"error_type": e.reason, "error": str(e)}
    ok, kind, err = check(functions, calls, ground_truth, category)
    return ok, {"calls": len(calls), **({"error_type": kind, "error": err} if not ok else {})}
