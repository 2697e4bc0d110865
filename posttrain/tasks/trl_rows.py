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
from posttrain.tasks.numbers import parse_numeric

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
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else {}
    source = str(row.get("data_source") or domain)
    digest = hashlib.sha256(json.dumps([m.content for m in prompt]).encode()).hexdigest()[:12]
    if row.get("id") is not None:
        rid = str(row["id"])
    elif extra.get("index") is not None:  # verl numbers rows per split and per source: both go in the id
        rid = "-".join(str(x) for x in (source, extra.get("split"), extra["index"]) if x is not None)
    else:
        rid = f"{source}-{digest}"
    return Task(
        id=rid, domain=source,
        prompt=prompt, verifier=spec, limits=Limits(max_steps=1, max_new_tokens=512, timeout_s=30.0),
        metadata={"source": "trl_rows", "ground_truth": truth}, oracle=f"\\boxed{{{truth}}}",
    )


def load_trl_rows(path: str | Path, domain: str = "imported", verifier: str | None = None) -> list[Task]:
    """Rows as tasks, ids unique within the file: a repeated id gets the prompt's digest, then a count."""
    tasks = parse_jsonl(path, row=lambda r: row_to_task(r, domain, verifier))
    return unique_ids(tasks)


def unique_ids(tasks: list[Task]) -> list[Task]:
    """The same tasks, a repeated id made unique (`id~digest`, then `id~digest~2`, ...), first kept as is."""
    import dataclasses

    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        tid = t.id
        if tid in seen:
            tid = f"{t.id}~{t.version[:8]}"
            while tid in seen:
                seen[tid] += 1
                tid = f"{t.id}~{t.version[:8]}~{seen[tid]}"
        seen.setdefault(tid, 1)
        out.append(t if tid == t.id else dataclasses.replace(t, id=tid))
    return out
