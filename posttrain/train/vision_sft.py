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

import random
from typing import Any, Callable, Sequence

import torch

from posttrain.config import SFTConfig
from posttrain.rollout.prompting import encode_completion
from posttrain.rollout.vision import concat_inputs, encode_task_prompt
from posttrain.train.batching import pack_sequences, token_logprobs
from posttrain.train.optim import build_optimizer, build_schedule
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


def sft_batch_loss(model: Any, items: Sequence[Item], pad_id: int, image_id: int | None) -> torch.Tensor:
    """Mean NLL over the answer tokens of `items` (image tokens masked out)."""
    tb = pack_sequences([(p, [(c, (), True)]) for p, c, _ in items], pad_id)
    if image_id is not None:
        tb.loss_mask[tb.input_ids[:, 1:] == image_id] = 0.0
    inputs = concat_inputs([d for _, _, imgs in items for d in imgs]) if any(i[2] for i in items) else {}
    logp, _ = token_logprobs(model, tb.input_ids, tb.attention_mask, **inputs)  # [B, L-1]
    return -(logp * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1)


def vision_sft_train(model: Any, tok: Any, tasks: Sequence[Task], cfg: SFTConfig, seed: int = 0,
                     on_step: Callable[[int, float], None] | None = None) -> tuple[list[float], list[str]]:
    """Train in place on oracle answers; returns (loss per step, prompt errors skipped)."""
    items, errors = encode_tasks(tok, tasks)
    if not items:
        raise ValueError(f"no usable SFT examples among {len(tasks)} tasks ({len(errors)} prompt errors)")
    processor = getattr(tok, "processor", None)
    image_id = getattr(processor, "image_token_id", None)
    rng = random.Random(seed)
    opt = build_optimizer(model.parameters(), cfg.optim)
    sched = build_schedule(opt, cfg.optim, cfg.steps)
    model.train()
    losses = []
    for step in range(cfg.steps):
        loss = sft_batch_loss(model, [items[rng.randrange(len(items))] for _ in range(cfg.batch_size)],
                              tok.pad_token_id, image_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses, errors
