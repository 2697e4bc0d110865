"""The RL update in one pass (`rl.prefix_layout: varlen`): every prompt once and every completion,
packed into one flat row with no padding and no dense mask, through one forward and one backward
(on CPU, whole groups cut into cache-sized passes: `CPU_PASS_TOKENS`).

    vb = varlen_batch(trajs, targets=tb.loss_mask.shape[1], pad_id=pad)   # None: nothing to do
    logp, ent = vb.logprobs(model)        # both [B, L-1], in pack_trajectories' layout

The row is [P_1 | c_11 | c_12 | ... | P_2 | c_21 | ...]: position ids restart at 0 for each
prompt and continue from it in each of its completions (P, P+1, ...), so RoPE sees what each
completion saw alone. Everything but attention (embeddings, projections, MLPs, norms) runs on
the N real tokens once, in one call per layer: no padding, no prompt repeated, no per-pass
overhead. Only attention needs to know where sequences end. It runs through a registered HF
attention function (`posttrain_varlen`, transformers' AttentionInterface) that reads this
batch's plan: inside each layer the flat queries, keys and values are gathered into a few
length buckets (the prefix-K/V layout's split, prefix_kv.split_passes) and attended with
torch's SDPA, then scattered back to the flat row:
- prompt buckets: prompts of about one length, right-padded, causal (SDPA's own is_causal);
- completion buckets: completions of about one length, one per row, whose keys are their
  prompt's keys then their own ([Pp | W], a small [R, 1, W, Pp + W] mask), as in prefix_kv.py.
So attention costs what prefix_kv's costs (~ G L (P + L) per group, never (P + G L)^2), and
the flat gather/scatter is differentiable: backward sums a prompt's key gradients over every
completion that read them. The logits are computed only at positions that predict a trained
token (`logits_to_keep`). tests/unit/train/test_varlen.py checks logprobs, entropies and
gradients against the plain layout.

Limits: the model's attention must be HF's standard attention interface (Llama, Qwen, Mistral
families: query/key/value after RoPE handed to the registered function); a sliding window shorter
than prompt + completion is not applied (as in prefix_kv.py), and attention logit soft-capping is
refused. Under gradient checkpointing the update uses the dense layout instead (`usable`):
backward's recompute of a layer would run after the attention switch is undone.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from posttrain.train.prefix_kv import _long, _picked, _tail, split_passes
from posttrain.types import Trajectory

ATTENTION_NAME = "posttrain_varlen"
# On CPU, whole groups are cut into passes of about this many tokens: one flat row of ~22k tokens
# ran 0.81-0.88x `kv` on the 2-core AMD EPYC (its MLP activations leave the cache: elementwise ops
# 2x slower), passes of 2,048 tokens 1.06-1.24x (benchmarks/rl_update_speed.py update, tiny model).
CPU_PASS_TOKENS = 2048.0


def usable(model: Any) -> bool:
    """False under gradient checkpointing (HF's activation checkpointing; older name below)."""
    checkpointed = getattr(model, "is_activation_checkpointing", None)
    return not (checkpointed if checkpointed is not None else getattr(model, "is_gradient_checkpointing", False))


def varlen_pass_tokens(model: Any) -> float:
    """Tokens per pass for `model`'s device: one pass on an accelerator, cache-sized passes on CPU."""
    return CPU_PASS_TOKENS if next(model.parameters()).device.type == "cpu" else float("inf")


@dataclass
class Bucket:
    """Rows of about one length, gathered from the flat row. Padding gathers position 0: a padding
    key is masked out of every real query, and a padding query's output is never read."""

    q_idx: torch.Tensor  # [R, W] flat positions of the queries
    k_idx: torch.Tensor  # [R, K] flat positions of the keys (prompt buckets: q_idx itself)
    mask: torch.Tensor | None  # [R, 1, W, K] bool; None: causal over q_idx (prompt buckets)
    sel: torch.Tensor  # [n] flat index r * W + j of the real queries, in order


@dataclass
class VarlenPass:
    """Whole groups (each prompt once, then its completions) in one flat row, run as one forward."""

    input_ids: torch.Tensor  # [1, N]
    position_ids: torch.Tensor  # [1, N]
    buckets: list[Bucket]
    inverse: torch.Tensor  # [N]: the buckets' concatenated real outputs, reordered to the flat row
    keep: torch.Tensor  # [K] flat positions whose logits are computed (each predicts a trained token)
    pred: torch.Tensor  # [M] index into keep of the position that predicts each trained token
    target: torch.Tensor  # [M]
    out: torch.Tensor  # [M] flat index i * T + j into the [B, T] plain layout

    def run(self, model: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p, entropy) of each trained token, [M] each; the caller holds varlen_attention."""
        self.calls = 0
        logits = model(input_ids=self.input_ids, position_ids=self.position_ids, logits_to_keep=self.keep,
                       varlen_plan=self).logits[0]  # [K, V]
        if self.calls == 0:  # the flat row under plain causal attention would be silently wrong
            raise RuntimeError(f"rl.prefix_layout=varlen: {type(model).__name__}'s attention does not go through "
                               "transformers' attention interface; use rl.prefix_layout=kv")
        return _picked(logits, self.pred, self.target)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float | None,
               dropout: float) -> torch.Tensor:
        """q [1, H, N, D], k and v [1, KVH, N, D] -> attention output [1, N, H, D]. One gather per
        tensor for all buckets (a gather per bucket would cost a full-size gradient buffer each)."""
        self.calls += 1
        H, D, KVH = q.shape[1], q.shape[3], k.shape[1]
        rep = H // KVH
        qs = q[0].transpose(0, 1)[self.q_all].split(self.q_sizes)  # per bucket [R * W, H, D]
        ks = k[0].transpose(0, 1)[self.k_all].split(self.k_sizes)  # per bucket [R * K, KVH, D]
        vs = v[0].transpose(0, 1)[self.k_all].split(self.k_sizes)
        parts = []
        for b, qb, kb, vb in zip(self.buckets, qs, ks, vs):
            R, W, K = b.q_idx.shape[0], b.q_idx.shape[1], b.k_idx.shape[1]
            qb = qb.view(R, W, H, D).transpose(1, 2)  # [R, H, W, D]
            kb, vb = kb.view(R, K, KVH, D).transpose(1, 2), vb.view(R, K, KVH, D).transpose(1, 2)  # [R, KVH, K, D]
            if rep > 1:
                kb, vb = kb.repeat_interleave(rep, dim=1), vb.repeat_interleave(rep, dim=1)
            o = torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, attn_mask=b.mask, dropout_p=dropout,
                                                                 is_causal=b.mask is None, scale=scaling)
            parts.append(o.transpose(1, 2).reshape(-1, H, D)[b.sel])  # [n, H, D]
        return torch.cat(parts)[self.inverse].unsqueeze(0)  # [1, N, H, D]

    def __post_init__(self) -> None:
        self.q_all = torch.cat([b.q_idx.reshape(-1) for b in self.buckets])
        self.k_all = torch.cat([b.k_idx.reshape(-1) for b in self.buckets])
        self.q_sizes = [b.q_idx.numel() for b in self.buckets]
        self.k_sizes = [b.k_idx.numel() for b in self.buckets]
        self.calls = 0  # attention layers that ran through this plan in the last forward


@dataclass
class VarlenBatch:
    passes: list[VarlenPass]  # one unless rl.micro_tokens-like pass_tokens cut the groups
    shape: tuple[int, int]  # (B, T)

    def logprobs(self, model: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p of every completion token, its entropy), each [B, T]; zeros elsewhere."""
        n = self.shape[0] * self.shape[1]
        logp, ent = torch.zeros(n), torch.zeros(n)
        with varlen_attention(model):
            for vp in self.passes:
                lp, en = vp.run(model)
                logp, ent = logp.scatter(0, vp.out, lp), ent.scatter(0, vp.out, en)
        return logp.view(self.shape), ent.view(self.shape)


def _attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any,
               dropout: float = 0.0, scaling: float | None = None, varlen_plan: VarlenBatch | None = None,
               softcap: float | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """HF attention interface entry: the plan passed to the model's forward does the attention."""
    if varlen_plan is None:
        raise RuntimeError(f"attention {ATTENTION_NAME!r} runs only inside VarlenBatch.logprobs (no plan given)")
    if softcap:
        raise ValueError(f"attention {ATTENTION_NAME!r}: attention logit soft-capping is not supported")
    return varlen_plan.attend(query, key, value, scaling, dropout), None


@contextlib.contextmanager
def varlen_attention(model: Any) -> Iterator[None]:
    """The model's attention layers call `_attention` for the duration (one forward and its
    backward's recompute under checkpointing need no switch: the graph holds the function)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, _attention)
    cfg = model.config
    before = cfg._attn_implementation
    cfg._attn_implementation = ATTENTION_NAME
    try:
        yield
    finally:
        cfg._attn_implementation = before


def varlen_batch(trajs: Sequence[Trajectory], targets: int, pad_id: int, keys_per_token: float = 1000.0,
                 bucket_tokens: float = 32.0, max_buckets: int = 8,
                 pass_tokens: float = float("inf")) -> VarlenBatch | None:
    """The flat layout of `trajs` (None when no sample has a completion token): one pass, or
    whole groups cut into passes of about `pass_tokens` tokens each. Buckets are cut by
    `split_passes` with a small per-bucket cost (an SDPA call per layer, not a forward)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(trajs):
        groups.setdefault(tuple(t.prompt_ids), []).append(i)
    tails = [_tail(t) for t in trajs]
    if not any(tails):
        return None
    chunks: list[list[tuple[int, ...]]] = [[]]
    used = 0
    for prompt, members in groups.items():
        n = len(prompt) + sum(len(tails[i]) for i in members)
        if chunks[-1] and used + n > pass_tokens:
            chunks.append([])
            used = 0
        chunks[-1].append(prompt)
        used += n
    passes = [_one_pass(trajs, tails, {p: groups[p] for p in c}, targets, keys_per_token, bucket_tokens, max_buckets)
              for c in chunks]
    return VarlenBatch([p for p in passes if p is not None], (len(trajs), targets))


def _one_pass(trajs: Sequence[Trajectory], tails: list[list[int]], groups: dict[tuple[int, ...], list[int]],
              targets: int, keys_per_token: float, bucket_tokens: float, max_buckets: int) -> VarlenPass | None:
    members = [i for m in groups.values() for i in m]
    if not any(tails[i] for i in members):
        return None
    ids: list[int] = []
    pos: list[int] = []
    prompt_at: dict[tuple[int, ...], int] = {}
    tail_at: dict[int, int] = {}
    for prompt, group in groups.items():
        P = len(prompt)
        prompt_at[prompt] = len(ids)
        ids += prompt
        pos += range(P)
        for i in group:
            tail_at[i] = len(ids)
            ids += tails[i]
            pos += range(P, P + len(tails[i]))
    N = len(ids)
    pred_pos, target, out = [], [], []
    for i in members:
        n, P = len(tails[i]), len(trajs[i].prompt_ids)
        if n:
            pred_pos += [prompt_at[tuple(trajs[i].prompt_ids)] + P - 1] + list(range(tail_at[i], tail_at[i] + n - 1))
            target += tails[i]
            out += range(i * targets + P - 1, i * targets + P - 1 + n)
    keep = torch.unique(_long(pred_pos))  # sorted
    buckets = _prompt_buckets(groups, prompt_at, keys_per_token, bucket_tokens, max_buckets)
    buckets += _tail_buckets(trajs, members, tails, tail_at, prompt_at, keys_per_token, bucket_tokens, max_buckets)
    order = torch.cat([b.q_idx.reshape(-1)[b.sel] for b in buckets])  # [N] flat position of each output
    return VarlenPass(_long(ids, 1, N), _long(pos, 1, N), buckets, torch.argsort(order), keep,
                      torch.searchsorted(keep, _long(pred_pos)), _long(target), _long(out))


def _rows(starts: Sequence[int], lens: Sequence[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([R, width] flat positions start..start+len-1, padded with 0; [R, width] bool real)."""
    ar = torch.arange(width)
    real = ar[None, :] < _long(lens)[:, None]
    idx = torch.where(real, _long(starts)[:, None] + ar[None, :], 0)
    return idx, real


def _prompt_buckets(groups: dict[tuple[int, ...], list[int]], prompt_at: dict[tuple[int, ...], int],
                    keys_per_token: float, bucket_tokens: float, max_buckets: int) -> list[Bucket]:
    prompts = sorted(groups, key=lambda p: -len(p))
    plens = [len(p) for p in prompts]
    cuts = split_passes(plens, 0, keys_per_token, bucket_tokens, max_buckets)
    out = []
    for a, b in zip(cuts, cuts[1:]):
        idx, real = _rows([prompt_at[p] for p in prompts[a:b]], plens[a:b], plens[a])
        out.append(Bucket(idx, idx, None, real.reshape(-1).nonzero().squeeze(1)))
    return out


def _tail_buckets(trajs: Sequence[Trajectory], members: Sequence[int], tails: list[list[int]], tail_at: dict[int, int],
                  prompt_at: dict[tuple[int, ...], int], keys_per_token: float, bucket_tokens: float,
                  max_buckets: int) -> list[Bucket]:
    order = sorted((i for i in members if tails[i]), key=lambda i: -len(tails[i]))
    if not order:
        return []
    lens = [len(tails[i]) for i in order]
    pmax = max(len(trajs[i].prompt_ids) for i in order)
    cuts = split_passes(lens, pmax, keys_per_token, bucket_tokens, max_buckets)
    out = []
    for a, b in zip(cuts, cuts[1:]):
        rows = order[a:b]
        W = lens[a]
        plens = [len(trajs[i].prompt_ids) for i in rows]
        Pp = max(plens)
        q_idx, real = _rows([tail_at[i] for i in rows], lens[a:b], W)  # [R, W]
        p_idx, p_real = _rows([prompt_at[tuple(trajs[i].prompt_ids)] for i in rows], plens, Pp)  # [R, Pp]
        own = (torch.tril(torch.ones(W, W, dtype=torch.bool)) & real[:, None, :]) | torch.eye(W, dtype=torch.bool)
        sees = p_real[:, None, :] & real[:, :, None]  # [R, W, Pp]; padding queries see only themselves
        mask = torch.cat((sees, own), dim=-1).unsqueeze(1)  # [R, 1, W, Pp + W]
        out.append(Bucket(q_idx, torch.cat((p_idx, q_idx), dim=1), mask, real.reshape(-1).nonzero().squeeze(1)))
    return out
