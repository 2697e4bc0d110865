"""Shared-prefix layout for the policy update: a GRPO group's prompt is computed once.

    sb = share_prefixes(trajs, targets=tb.loss_mask.shape[1], pad_id=pad)   # None: nothing shared
    logp, ent = sb.logprobs(model)        # both [B, L-1], in pack_trajectories' layout

The n samples of a group share their prompt. Instead of n rows of (prompt + completion),
one row holds the prompt once and every completion after it: [P | c_1 | c_2 | ... | c_n].
A 4D boolean mask lets c_k attend to the prompt and causally to itself, never to another
c_j, and c_k's position ids continue from the prompt (P, P+1, ...), so each completion
sees exactly the context it had alone: same positions for RoPE, same keys in attention,
same logits (tests/unit/train/test_shared_prefix.py checks logprobs and gradients against
the plain layout). The first token of each completion is predicted from the prompt's last
position, which the group shares. With 16 prompts x 8 samples of ~10 + 6 tokens, the
update runs ~58 tokens per group instead of 128, and forward and backward shrink with it.

A group longer than `max_row` tokens is split into pieces, each repeating the prompt, and
short groups share a row (each attending only within itself). Not
used for image inputs (their pixel_values are per sample) or for attention
implementations that may ignore a custom 4D mask (flash attention): callers fall back to
the plain layout, see `can_share`.

Attention here costs (P + G * L)^2 per group row. prefix_kv.py (`rl.prefix_layout=kv`;
`auto`, the default, picks by cost) runs the prompt once and attends each completion to its
K/V, which grows with G * L. This layout stays selectable (`rl.prefix_layout=dense`) as the
reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from posttrain.types import Trajectory

MASK_SAFE_ATTENTION = ("sdpa", "eager")


@dataclass
class SharedBatch:
    input_ids: torch.Tensor  # [R, Lr]
    attention_mask: torch.Tensor  # [R, 1, Lr, Lr] bool: prompt causal; each tail sees the prompt and itself
    position_ids: torch.Tensor  # [R, Lr]
    pred: torch.Tensor  # [N] flat index r * Lr + pos of the position that predicts each tail token
    target: torch.Tensor  # [N] the tail tokens
    out: torch.Tensor  # [N] flat index i * T + j into the [B, T] plain layout (T = L - 1)
    shape: tuple[int, int]  # (B, T)

    def logprobs(self, model: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p of every tail token, its entropy), each [B, T]; zeros where no tail token is."""
        logits = model(input_ids=self.input_ids, attention_mask=attention_mask_for(model, self.attention_mask),
                       position_ids=self.position_ids).logits  # [R, Lr, V]
        flat = logits.reshape(-1, logits.shape[-1])[self.pred].float()  # [N, V]
        lsm = torch.log_softmax(flat, -1)
        tok = lsm.gather(-1, self.target.unsqueeze(-1)).squeeze(-1)  # [N]
        ent = -(lsm.exp() * lsm).sum(-1)  # [N]
        n = self.shape[0] * self.shape[1]
        logp = torch.zeros(n, dtype=tok.dtype).scatter(0, self.out, tok).view(self.shape)
        return logp, torch.zeros(n, dtype=ent.dtype).scatter(0, self.out, ent.detach()).view(self.shape)


def can_share(model: Any) -> bool:
    """True when the model's attention honours a custom 4D mask (image inputs: the caller's check)."""
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None) or "eager"
    return impl in MASK_SAFE_ATTENTION


def attention_mask_for(model: Any, mask: torch.Tensor) -> torch.Tensor:
    """A boolean 4D mask as the model's attention takes it: sdpa reads booleans, HF's eager
    attention adds the mask to the scores, so it gets 0 / dtype-min (True / False)."""
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None) or "eager"
    if impl != "eager":
        return mask
    dtype = next(model.parameters()).dtype
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)


def _tail(t: Trajectory) -> list[int]:
    return [i for turn in t.turns for i in turn.token_ids]


def share_prefixes(trajs: Sequence[Trajectory], targets: int, pad_id: int, max_row: int = 2048,
                   row_tokens: int = 128) -> SharedBatch | None:
    """The shared layout of `trajs`, or None when no two of them share a prompt (no gain).

    A block is one prompt and the tails that share it (split so a block stays within `max_row`
    tokens). Blocks are then packed first-fit decreasing into rows of about `row_tokens`
    tokens (a longer block gets a row of its own): short groups would otherwise pad every
    row to the longest, and attention, which is quadratic in the row, stays cheap.
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(trajs):
        groups.setdefault(tuple(t.prompt_ids), []).append(i)
    if all(len(g) < 2 for g in groups.values()):
        return None
    tails = [_tail(t) for t in trajs]
    blocks: list[tuple[tuple[int, ...], list[int], int]] = []  # (prompt, member indices, tokens)
    for prompt, members in groups.items():
        piece, used = [], len(prompt)
        for i in members:
            n = len(tails[i])
            if piece and used + n > max_row:
                blocks.append((prompt, piece, used))
                piece, used = [], len(prompt)
            piece.append(i)
            used += n
        blocks.append((prompt, piece, used))
    rows: list[list[tuple[tuple[int, ...], list[int], int]]] = []
    room: list[int] = []
    for b in sorted(blocks, key=lambda b: -b[2]):
        for r, left in enumerate(room):
            if b[2] <= left:
                rows[r].append(b)
                room[r] -= b[2]
                break
        else:
            rows.append([b])
            room.append(max(row_tokens, b[2]) - b[2])
    width = max(sum(b[2] for b in row) for row in rows)
    # per position: blk = block within the row (-1 padding), seg = 0 for the block's prompt, k for its tail k
    ids_rows, pos_rows, blk_rows, seg_rows = [], [], [], []
    pred, target, out = [], [], []
    for r, row in enumerate(rows):
        ids, pos, blk, seg = [], [], [], []
        for j, (prompt, members, _) in enumerate(row):
            P, start = len(prompt), len(ids)
            ids += prompt
            pos += range(P)
            blk += [j] * P
            seg += [0] * P
            for k, i in enumerate(members, start=1):
                tail, at = tails[i], len(ids)
                n = len(tail)
                ids += tail
                pos += range(P, P + n)
                blk += [j] * n
                seg += [k] * n
                # tail token t sits at plain position P + t, so its target index is P + t - 1; it is
                # predicted by the prompt's last position (t = 0) or by tail token t - 1
                pred += [r * width + start + P - 1] + list(range(r * width + at, r * width + at + n - 1))
                target += tail
                out += range(i * targets + P - 1, i * targets + P - 1 + n)
        pad = width - len(ids)
        ids_rows.append(ids + [pad_id] * pad)
        pos_rows.append(pos + [0] * pad)
        blk_rows.append(blk + [-1] * pad)
        seg_rows.append(seg + [-1] * pad)
    ids = torch.tensor(ids_rows, dtype=torch.long)  # [R, Lr]
    pos = torch.tensor(pos_rows, dtype=torch.long)
    blk, seg = torch.tensor(blk_rows, dtype=torch.long), torch.tensor(seg_rows, dtype=torch.long)
    causal = torch.tril(torch.ones(width, width, dtype=torch.bool))
    same_block = (blk[:, :, None] == blk[:, None, :]) & (blk[:, :, None] >= 0)  # [R, Lr, Lr]
    q, kv = seg[:, :, None], seg[:, None, :]
    mask = causal & same_block & ((kv == 0) | (kv == q))
    mask = mask | torch.eye(width, dtype=torch.bool)  # padding attends to itself: no empty (NaN) rows
    return SharedBatch(ids, mask.unsqueeze(1), pos, torch.tensor(pred, dtype=torch.long),
                       torch.tensor(target, dtype=torch.long), torch.tensor(out, dtype=torch.long),
                       (len(trajs), targets))
