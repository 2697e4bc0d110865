"""Supervised fine-tuning on tasks with images: the loss on answer tokens only.

    losses = vision_sft_train(model, tok, tasks, SFTConfig(steps=150))   # tasks with oracles

Each task's prompt goes through `encode_task_prompt` (the processor's chat template and
image expansion, the same call the engines' prompts come from), its oracle answer plus
EOS is the target. Prompt tokens, image placeholder tokens included, have loss mask 0;
the image reaches the loss only through the answer tokens that attend to it. Text-only
tasks mix in unchanged. Tasks whose prompt cannot be built (a bad image) are skipped and
counted, never fatal.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from posttrain.config import SFTConfig
from posttrain.rollout.prompting import encode_completion
from posttrain.rollout.vision import encode_task_prompt
from posttrain.train.sft import DemoSFT
from posttrain.train.supervised import LocalSupervisedTrainer, train_supervised
from posttrain.types import Task

Item = tuple[tuple[int, ...], tuple[int, ...], tuple[dict, ...]]  # prompt ids, answer ids, image inputs


def encode_tasks(tok: Any, tasks: Sequence[Task]) -> tuple[list[Item], list[str]]:
    """(items, errors): one item per task with an oracle; one error line per task that failed."""
    items, errors = [], []
    for t in tasks:
        if t.oracle is None:
            continue
        vp = encode_task_prompt(tok, t)
        if vp.error:
            errors.append(vp.error)
            continue
        items.append((vp.ids, encode_completion(tok, t.oracle), vp.images))
    return items, errors


def vision_sft_train(model: Any, tok: Any, tasks: Sequence[Task], cfg: SFTConfig, seed: int = 0,
                     on_step: Callable[[int, float], None] | None = None) -> tuple[list[float], list[str]]:
    """Train in place on oracle answers through the one supervised loop (train/supervised.py, objective
    sft.DemoSFT with the images); returns (loss per step, prompt errors skipped)."""
    items, errors = encode_tasks(tok, tasks)
    if not items:
        raise ValueError(f"no usable SFT examples among {len(tasks)} tasks ({len(errors)} prompt errors)")
    from posttrain.models.vlm import processor_of

    objective = DemoSFT([((p, [(c, (), True)]), images) for p, c, images in items], cfg.batch_size, tok.pad_token_id,
                        getattr(processor_of(tok), "image_token_id", None))
    hist = train_supervised(objective, LocalSupervisedTrainer(model, cfg.optim, cfg.steps), cfg.steps, seed,
                            on_step=None if on_step is None else lambda k, row: on_step(k, row["loss"]))
    return [row["loss"] for row in hist], errors
