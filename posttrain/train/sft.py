"""Supervised fine-tuning on chat examples, with the loss on assistant tokens only.

    examples = [(prompt_messages, "answer"), ...]
    history = sft_train(model, tokenizer, examples, SFTConfig(steps=200))

Each example is formatted with the tokenizer's chat template; the target is the answer
followed by EOS. Batches are drawn with a seeded generator, so a run is reproducible.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

import torch

from posttrain.config import SFTConfig
from posttrain.rollout.prompting import encode_completion, encode_prompt
from posttrain.train.batching import pack_sequences, token_logprobs
from posttrain.types import Message

Example = tuple[Sequence[Message], str]


def encode_examples(tokenizer: Any, examples: Sequence[Example]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(encode_prompt(tokenizer, msgs), encode_completion(tokenizer, ans)) for msgs, ans in examples]


def lr_lambda(warmup: int, total: int) -> Callable[[int], float]:
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        progress = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return f


def sft_train(model: Any, tokenizer: Any, examples: Sequence[Example], cfg: SFTConfig, seed: int = 0,
              on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train in place; returns the loss per step. Loss = mean NLL over answer tokens."""
    data = encode_examples(tokenizer, examples)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg.warmup_steps, cfg.steps))
    model.train()
    losses = []
    for step in range(cfg.steps):
        batch = [data[rng.randrange(len(data))] for _ in range(cfg.batch_size)]
        tb = pack_sequences([(p, [(c, (), True)]) for p, c in batch], tokenizer.pad_token_id)
        logp, _ = token_logprobs(model, tb.input_ids, tb.attention_mask)  # [B, L-1]
        loss = -(logp * tb.loss_mask).sum() / tb.loss_mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss))
        if on_step is not None:
            on_step(step, float(loss))
    model.eval()
    return losses
