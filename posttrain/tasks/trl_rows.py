"""Import TRL- / verl-style JSONL rows as tasks.

Accepted row shapes (one JSON object per line):
  - TRL: `{"prompt": "..." | [{"role", "content"}...], "answer": "..."}` (or `solution`)
  - verl: `{"prompt": [...], "data_source": "...", "reward_model": {"ground_truth": "..."}}`
  - either with a top-level `ground_truth`.
A ground truth that parses as a number gets `math_answer` (normalised, with tolerance);
anything else gets `text_match`. Pass `verifier=` to force one. The oracle is
`\\boxed{<ground truth>}`. Errors name the file, line and field.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from posttrain.tasks.io import FieldError, parse_jsonl
from posttrain.types import Limits, Message, Spec, Task
from posttrain.verifiers.math_answer import parse_numeric

_ROLES = ("system", "user", "assistant")


def _prompt(row: Mapping[str, Any]) -> tuple[Message, ...]:
    p = row.get("prompt")
    if isinstance(p, str) and p:
        return (Message("user", p),)
    if isinstance(p, list) and p:
        out = []
        for i, m in enumerate(p):
            if not isinstance(m, Mapping) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
                raise FieldError(f"prompt[{i}]", "expected {role: system|user|assistant, content: string}")
            out.append(Message(m["role"], m["content"]))
        return tuple(out)
    raise FieldError("prompt", "missing or empty (a string or a list of chat messages)")


def _truth(row: Mapping[str, Any]) -> tuple[str, str]:
    for key in ("answer", "ground_truth", "solution"):
        if key in row:
            return str(row[key]), key
    rm = row.get("reward_model")
    if isinstance(rm, Mapping) and "ground_truth" in rm:
        return str(rm["ground_truth"]), "reward_model.ground_truth"
    raise FieldError("answer", "missing (give answer, ground_truth, solution or reward_model.ground_truth)")


def row_to_task(row: Any, domain: str = "imported", verifier: str | None = None) -> Task:
    if not isinstance(row, Mapping):
        raise FieldError("", "expected a JSON object per line")
    prompt = _prompt(row)
    truth, key = _truth(row)
    if not truth.strip():
        raise FieldError(key, "empty ground truth")
    name = verifier or ("math_answer" if parse_numeric(truth) is not None and len(truth) < 40 else "text_match")
    spec = Spec(name, {"answer": truth} if name == "math_answer" else {"expected": truth})
    extra = row.get("extra_info")
    rid = row.get("id", extra.get("index") if isinstance(extra, Mapping) else None)
    digest = hashlib.sha256(json.dumps([m.content for m in prompt]).encode()).hexdigest()[:12]
    return Task(
        id=str(rid) if rid is not None else f"{domain}-{digest}", domain=str(row.get("data_source") or domain),
        prompt=prompt, verifier=spec, limits=Limits(max_steps=1, max_new_tokens=512, timeout_s=30.0),
        metadata={"source": "trl_rows", "ground_truth": truth}, oracle=f"\\boxed{{{truth}}}",
    )


def load_trl_rows(path: str | Path, domain: str = "imported", verifier: str | None = None) -> list[Task]:
    return parse_jsonl(path, row=lambda r: row_to_task(r, domain, verifier))
