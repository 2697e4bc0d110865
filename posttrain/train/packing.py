"""Sequence packing: several short examples share one row, each attending only to itself.

    rows = pack_examples(encoded, max_len=256)        # first-fit decreasing into rows
    pb = packed_batch(rows, pad_id)                   # ids, positions, block-diagonal mask
    logp = batch_logprobs(model, pb)                  # [R, L-1]

Attention stays correct per sequence by two things: position ids restart at 0 for every
packed sequence (so RoPE sees the same positions as unpacked), and a 4D boolean mask
[R, 1, L, L] that is causal *within* a sequence and False across sequences. The target
of the last token of one sequence is the first token of the next; it is masked out of
the loss, so packed and unpacked losses are equal (tests/unit/train/test_sft.py, test_packed_loss_equals_unpacked_loss).

Limits: the 4D mask costs O(L^2) memory per row; models whose attention ignores custom
4D masks (some flash-attention kernels) need the varlen path instead, which we do not
ship. An example longer than `max_len` keeps its last `max_len` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

Encoded = tuple[Sequence[int], Sequence[int]]  # (ids, target mask): mask 1 on tokens to learn


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # [R, L]
    attention_mask: torch.Tensor  # [R, 1, L, L] bool block-diagonal causal, or [R, L] for plain padding
    loss_mask: torch.Tensor  # [R, L-1], 1 where target j+1 is a learned token of the same sequence
    position_ids: torch.Tensor | None  # [R, L], restart at 0 per sequence; None for plain padding
    n_sequences: int


def truncate(ex: Encoded, max_len: int) -> Encoded:
    """Keep the last `max_len` tokens (the targets sit at the end of a conversation)."""
    ids, mask = list(ex[0]), list(ex[1])
    return (ids[-max_len:], mask[-max_len:]) if len(ids) > max_len else (ids, mask)


def pack_examples(examples: Sequence[Encoded], max_len: int) -> list[list[Encoded]]:
    """First-fit decreasing: few rows, deterministic for a given input order."""
    items = sorted((truncate(e, max_len) for e in examples), key=lambda e: -len(e[0]))
    rows: list[list[Encoded]] = []
    room: list[int] = []
    for e in items:
        n = len(e[0])
        for i, r in enumerate(room):
            if n <= r:
                rows[i].append(e)
                room[i] -= n
                break
        else:
            rows.append([e])
            room.append(max_len - n)
    return rows


def _fill(rows: Sequence[Sequence[Encoded]], pad_id: int):
    width = max(sum(len(ids) for ids, _ in row) for row in rows)
    R = len(rows)
    ids = torch.full((R, width), pad_id, dtype=torch.long)
    pos = torch.zeros((R, width), dtype=torch.long)
    seg = torch.full((R, width), -1, dtype=torch.long)  # sequence index per token; -1 = padding
    target = torch.zeros((R, width))
    for r, row in enumerate(rows):
        at = 0
        for s, (x, m) in enumerate(row):
            k = len(x)
            ids[r, at:at + k] = torch.tensor(list(x), dtype=torch.long)
            pos[r, at:at + k] = torch.arange(k)
            seg[r, at:at + k] = s
            target[r, at:at + k] = torch.tensor(list(m), dtype=torch.float)
            at += k
    return ids, pos, seg, target


def packed_batch(rows: Sequence[Sequence[Encoded]], pad_id: int) -> PackedBatch:
    ids, pos, seg, target = _fill(rows, pad_id)
    width = ids.shape[1]
    same = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] >= 0)  # [R, L, L]
    causal = torch.tril(torch.ones(width, width, dtype=torch.bool))
    mask = (same & causal) | torch.eye(width, dtype=torch.bool)  # padding attends to itself: no NaN rows
    same_next = (seg[:, 1:] == seg[:, :-1]).float()  # target j+1 belongs to the sequence of token j
    return PackedBatch(ids, mask.unsqueeze(1), target[:, 1:] * same_next, pos, sum(len(r) for r in rows))


def padded_batch(examples: Sequence[Encoded], pad_id: int) -> PackedBatch:
    """One example per row, right-padded: the unpacked reference layout."""
    ids, _, seg, target = _fill([[e] for e in examples], pad_id)
    return PackedBatch(ids, (seg >= 0).long(), target[:, 1:], None, len(examples))


def batch_logprobs(model: Any, pb: PackedBatch, **model_inputs: Any) -> torch.Tensor:
    """log p(token j+1 | its own sequence up to j) at the learned tokens (`pb.loss_mask`), 0 elsewhere: [R, L-1]. `model_inputs` (a VLM's
    pixel_values, for the rows with image placeholders, in row order) go to the model."""
    from posttrain.train.batching import target_logprobs

    kw = {} if pb.position_ids is None else {"position_ids": pb.position_ids}
    kw.update(model_inputs)
    # only where the loss reads: the vocabulary projection at the learned tokens, 0 elsewhere (batching.py)
    return target_logprobs(model, pb.input_ids, pb.attention_mask, pb.loss_mask, **kw)
