"""Preference pairs on image tasks, for the DPO functions in dpo.py.

    pairs, errors = image_pairs(tok, tasks, rejected=lambda t: wrong_answer(t))
    ref = reference_logprobs(vlm, pairs, pad_id, max_len)
    train_dpo(vlm, pairs, ref, DPOConfig(...), TrainerConfig(), pad_id)

Each task's prompt goes through `encode_task_prompt` (the engines' own prompt path: the
processor's chat template, image expansion and pixel values); the chosen completion is
the task's oracle answer, the rejected one whatever `rejected(task)` returns (a sampled
wrong answer, a perturbed oracle). Tasks without an oracle or a rejected answer are
skipped; tasks whose prompt cannot be built (a bad image) are skipped and reported.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from posttrain.rollout.prompting import encode_completion
from posttrain.rollout.vision import encode_task_prompt
from posttrain.train.dpo import Pair
from posttrain.types import Task


def image_pairs(tok: Any, tasks: Sequence[Task], rejected: Callable[[Task], str | None]
                ) -> tuple[list[Pair], list[str]]:
    """(pairs, errors): oracle answer preferred over `rejected(task)`, with the task's images."""
    pairs, errors = [], []
    for t in tasks:
        bad = rejected(t)
        if t.oracle is None or bad is None or bad == t.oracle:
            continue
        vp = encode_task_prompt(tok, t)
        if vp.error:
            errors.append(vp.error)
            continue
        pairs.append(Pair(vp.ids, encode_completion(tok, t.oracle), encode_completion(tok, bad), t.id, vp.images))
    return pairs, errors
