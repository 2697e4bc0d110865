"""Admission of waiting samples into lanes: one batched prefill per shared prompt.

A chunk is (prompt, m samples). Its prompt is looked up in the paged store, only the
uncached tail is run through the model (one scratch row per chunk, all chunks in one
padded forward), the prompt's full blocks are cached, and the scratch row is copied into
the m sample lanes. So a GRPO group of G samples prefills its prompt once: the other
G - 1 samples' prompt tokens count as cache hits, as do the store's cached blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.rollout.engines.fast.model import FastLM, Lanes
from posttrain.rollout.engines.fast.kv_cache import PagedStore


@dataclass
class PrefillStats:
    prompt_tokens: int = 0  # prompt tokens over every admitted sample
    computed_tokens: int = 0  # prompt tokens actually run through the model

    @property
    def hit_rate(self) -> float:
        return 1.0 - self.computed_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def prefill(lm: FastLM, lanes: Lanes, store: PagedStore | None, prompts: list[tuple[int, ...]],
            counts: list[int], row0: int, stats: PrefillStats | None,
            images: list[tuple[int, torch.Tensor] | None] | None = None) -> torch.Tensor:
    """Fill lanes row0.. with the prompts' KV (counts[i] lanes for prompt i); logits [R, V].

    Returns the next-token logits after each prompt (one row per prompt, not per lane).
    images[i] = (placeholder token id, features [n, hidden]) puts prompt i's image features
    at its n placeholder positions; such a prompt neither reads nor fills the store, whose
    keys are token ids only.
    """
    R = len(prompts)
    images = images or [None] * R
    cached = []  # per prompt: block ids served by the store
    for p, im in zip(prompts, images):
        cached.append(store.lookup(p, len(p) - 1) if store is not None and im is None else [])
    bs = store.block if store is not None else 1
    start = [len(b) * bs for b in cached]
    n_new = [len(p) - s for p, s in zip(prompts, start)]
    T = max(n_new)
    scratch = lm.new_lanes(R, max(start) + T)
    if store is not None:
        for r, blocks in enumerate(cached):
            store.to_lane(blocks, scratch.k, scratch.v, r)
    tokens = torch.zeros(R, T, dtype=torch.long, device=lm.device)  # right-padded
    for r, (p, s) in enumerate(zip(prompts, start)):
        tokens[r, : len(p) - s] = torch.tensor(p[s:], dtype=torch.long)
    st = torch.tensor(start, dtype=torch.long, device=lm.device)
    embeds = None
    if any(im is not None for im in images):
        embeds = lm.embed_tokens(tokens)  # [R, T, hidden]
        for r, im in enumerate(images):
            if im is not None:  # image prompts start at 0 (no store), so token positions are prompt positions
                embeds[r][tokens[r] == im[0]] = im[1].to(embeds.dtype)
    hidden = lm.forward(tokens, st, scratch, fused=False, embeds=embeds)  # [R, T, hidden]; matmul attention
    last = torch.tensor([n - 1 for n in n_new], device=lm.device)
    logits = lm.logits(hidden[torch.arange(R, device=lm.device), last])  # [R, V]
    if store is not None:
        for r, (p, im) in enumerate(zip(prompts, images)):
            if im is None:
                store.insert(p, scratch.k, scratch.v, r)
    dst = row0
    for r, (p, m) in enumerate(zip(prompts, counts)):
        lanes.copy_from(scratch, torch.full((m,), r, device=lm.device), dst, len(p))
        dst += m
    if stats is not None:
        stats.prompt_tokens += sum(len(p) * m for p, m in zip(prompts, counts))
        stats.computed_tokens += sum(n_new)
    return logits
