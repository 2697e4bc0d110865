"""Preference pairs on image tasks, for the DPO functions in dpo.py.

    pairs, errors = image_pairs(tok, tasks, rejected=lambda t: wrong_answer(t))
    ref = reference_logprobs(vlm, pairs, pad_id, max_len)
    train_dpo(vlm, pairs, ref, DPOConfig(...), TrainerConfig(), pad_id)

Each task's prompt goes through `encode_task_prompt` (the engines' own prompt path: the
processor's chat template, image expansion and pixel values); the chosen completion is
the task's oracle answer, the rejected one whatever `rejected(task)` returns (a sampled
wrong answer, a perturbed oracle). Tasks without an oracle or a rejected answer are
skipped; tasks whose prompt cannot be built (a bad image) are skipped and reported.

`posttrain dpo` reads image pairs from its JSONL (written by `save_image_pairs`, or by hand)
through `image_pair_from_row`: a row whose prompt messages carry `attachments` (the
task-file format: kind, sha256, path relative to the JSONL) becomes a pair with the images'
model inputs; a bad row is a named error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from posttrain.errors import TaskFileError
from posttrain.rollout.prompting import encode_completion
from posttrain.rollout.vision import encode_messages, encode_task_prompt
from posttrain.train.pairs import Pair
from posttrain.types import Task


def image_pairs(tok: Any, tasks: Sequence[Task], rejected: Callable[[Task], str | None]
                ) -> tuple[list[Pair], list[str]]:
    """(pairs, errors): oracle answer preferred over `rejected(task)`, with the task's images."""
    pairs, errors = [], []
    for t in tasks:
        bad = _rejected_answer(t, rejected)
        if bad is None:
            continue
        vp = encode_task_prompt(tok, t)
        if vp.error:
            errors.append(vp.error)
            continue
        pairs.append(Pair(vp.ids, encode_completion(tok, t.oracle), encode_completion(tok, bad), t.id, vp.images))
    return pairs, errors


def _rejected_answer(task: Task, rejected: Callable[[Task], str | None]) -> str | None:
    """`rejected(task)` when the task can make a pair: it has an oracle and the rejected answer
    differs from it; else None."""
    bad = rejected(task)
    return None if task.oracle is None or bad is None or bad == task.oracle else bad


def has_attachments(raw: Any) -> bool:
    """Whether a JSONL row's raw prompt (a message list) carries attachments."""
    return isinstance(raw, list) and any(isinstance(m, dict) and m.get("attachments") for m in raw)


def image_pair_from_row(tok: Any, raw: list, chosen: str, rejected: str, where: str, folder: Path) -> Pair:
    """A pair from one pairs-JSONL row whose prompt `raw` has image attachments (paths relative
    to `folder`, the JSONL's directory); TaskFileError naming `where` for a bad message, a
    missing or altered image, or a text-only model."""
    from posttrain.tasks.images import add_search_root
    from posttrain.tasks.io import FieldError, message_from_dict

    try:
        prompt = tuple(message_from_dict(m, f"prompt[{i}]") for i, m in enumerate(raw))
    except FieldError as e:
        raise TaskFileError(f"{where}: field {e.path!r}: {e.msg}") from None
    add_search_root(folder)
    vp = encode_messages(tok, prompt, where)
    if vp.error:
        raise TaskFileError(vp.error)
    return Pair(vp.ids, encode_completion(tok, chosen), encode_completion(tok, rejected), where, vp.images)


def save_image_pairs(tasks: Sequence[Task], rejected: Callable[[Task], str | None], path: str | Path) -> int:
    """Write a pairs JSONL for `posttrain dpo` (dpo.data): per task, its prompt messages with
    their image attachments, chosen = the oracle, rejected = `rejected(task)`; the image files
    go beside the JSONL. Tasks without an oracle or a different rejected answer are skipped.
    Returns the rows written."""
    import json

    from posttrain.tasks.images import export_attachments
    from posttrain.tasks.io import task_to_dict

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in tasks:
        bad = _rejected_answer(t, rejected)
        if bad is None:
            continue
        rows.append({"messages": task_to_dict(t)["prompt"], "chosen": t.oracle, "rejected": bad, "task_id": t.id})
    export_attachments(list(tasks), p.parent)
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows)
