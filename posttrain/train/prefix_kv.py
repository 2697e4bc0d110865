"""Prefix-K/V layout for the policy update: a group's prompt runs once and every completion
reads its keys and values, so attention grows with the work (G x L), not with its square.

    kb = prefix_kv_batch(trajs, targets=tb.loss_mask.shape[1], pad_id=pad)  # None: nothing shared
    logp, ent = kb.logprobs(model)        # both [B, L-1], in pack_trajectories' layout
    sb = shared_layout("auto", model, trajs, targets, pad)   # rl.prefix_layout: auto | kv | dense

One prompt forward, then a few completion forwards (instead of one forward of everything):
1. Prompt passes: the U distinct prompts, sorted by length and cut into a few passes
   (`split_passes`), each right-padded to its longest and run with the model's own causal
   attention (no custom mask, so sdpa's fused kernel) and KV cache, and only the logits of
   each prompt's last real position (`logits_to_keep`): that position predicts the first
   token of every completion of the group. Steps 1 and 2 repeat per prompt pass.
2. Tail passes: the completions, one per row, sorted by length and cut into a few passes so
   rows are padded only to the longest of their pass (`split_passes`: a small dynamic program
   over padding, attention and a per-forward overhead). A row's cache is its prompt's K/V
   (`index_select` over the rows: backward sums the group's gradients into the one prompt
   computation), so its keys are [Pp prompt | W own]. A 4D mask [R, 1, W, Pp + W] shows a
   query the real prompt keys and, causally, its own completion; positions continue from the
   prompt (P, P+1, ...), so RoPE and attention see exactly what each completion saw alone.

Work: every prompt token and completion token runs once (plus a few percent of padding);
attention is U * Pmax^2 for the prompts plus about N * (Pp + W) for N completion tokens. The
dense layout (shared_prefix.py, kept selectable for reference) runs as many tokens but pays
(P + G * L)^2 per group; the plain layout repeats the prompt and pads every row to the
batch's longest sample. benchmarks/rl_step_bench.py compares the three. tests/unit/train/
test_prefix_kv.py checks logprobs, entropies and gradients against the plain layout (tiny
model, a random-init GQA Llama with sdpa and eager attention, LoRA through peft).

Limits: gradient checkpointing drops HF's cache inside each layer, so `shared_layout` falls
back to the dense layout there; attention implementations that may ignore a custom 4D mask
(flash attention) fall back to the plain layout (`can_share`). The prompt passes use the
model's own mask; the tail passes' 4D mask replaces it, so a sliding window shorter than
prompt + completion is not applied to completions (as in the dense layout). The K/V cache API is HF's (`cache`/`past_key_values`, DynamicCache).
"""

from __future__ import annotations

import inspect
import itertools
from array import array
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from posttrain.train.shared_prefix import attention_mask_for, can_share, share_prefixes
from posttrain.types import Trajectory


@dataclass
class TailPass:
    """Completions of about one length, one per row, after their prompts' K/V."""

    row_prompt: torch.Tensor  # [R] the prompt each row continues
    prefix: int  # Pp: the first Pp columns of the right-padded prompt K/V hold every row's prompt
    ids: torch.Tensor  # [R, W]
    mask: torch.Tensor  # [R, 1, W, Pp + W] bool: real prompt keys, then causal over the row's own tokens
    pos: torch.Tensor  # [R, W] positions P, P+1, ... after the row's prompt
    pred: torch.Tensor  # [n] flat index r * W + t of the position that predicts a token
    target: torch.Tensor  # [n]
    out: torch.Tensor  # [n] flat index i * T + j into the [B, T] plain layout
    cost: float = 0.0  # split_passes' token units: above PrefixKVBatch.recompute, recomputed in backward


@dataclass
class PromptPass:
    """Prompts of about one length, right-padded to Pmax, and the completions that continue them."""

    prompt_ids: torch.Tensor  # [U, Pmax] right-padded: the model's own causal attention is exact for real tokens
    prompt_pos: torch.Tensor  # [U, Pmax]
    last: torch.Tensor  # [U, 1] each prompt's last real position, whose logits predict its completions' first token
    first_pred: torch.Tensor  # [N1] prompt whose last position predicts a completion's first token
    first_target: torch.Tensor  # [N1]
    first_out: torch.Tensor  # [N1]
    passes: list[TailPass]
    cost: float = 0.0


@dataclass
class PrefixKVBatch:
    prompt_passes: list[PromptPass]  # prompts bucketed by length: one long prompt pads no short one
    shape: tuple[int, int]  # (B, T)
    cost: float = 0.0  # estimated work in token units (split_passes' model), for rl.prefix_layout=auto
    # A pass costing more (rl.micro_tokens) keeps no activations: backward recomputes its forward
    # (torch.utils.checkpoint). A 2,591-token prompt's 8 completions held ~5 GiB of attention
    # weights for backward (8 x 9 heads x 192 x 2,783 floats a layer, 30 layers).
    recompute: float = float("inf")

    def logprobs(self, model: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p of every completion token, its entropy), each [B, T]; zeros elsewhere."""
        from transformers import DynamicCache

        name = _cache_kwarg(model)
        n = self.shape[0] * self.shape[1]
        logp, ent = torch.zeros(n), torch.zeros(n)
        for pp in self.prompt_passes:
            def prompt(pp=pp):
                # no mask: the model's causal attention (sdpa may use its fused kernel, which a custom
                # mask rules out); no cache config: no sliding-window cropping of the prompt's keys
                out = model(input_ids=pp.prompt_ids, position_ids=pp.prompt_pos, use_cache=True,
                            logits_to_keep=pp.last, **{name: DynamicCache()})
                kv = _cache_layers(getattr(out, name, None) or out.past_key_values)  # per layer [U, kvh, Pmax, D]
                return (*_picked(out.logits[:, 0], pp.first_pred, pp.first_target), *[x for kv_l in kv for x in kv_l])

            lp, en, *flat = self._run(prompt, pp.cost)
            logp, ent = logp.scatter(0, pp.first_out, lp), ent.scatter(0, pp.first_out, en)
            for tp in pp.passes:
                def tail(*flat, tp=tp):
                    cache = DynamicCache([(k[:, :, :tp.prefix].index_select(0, tp.row_prompt),
                                           v[:, :, :tp.prefix].index_select(0, tp.row_prompt))
                                          for k, v in zip(flat[0::2], flat[1::2])])
                    logits = model(input_ids=tp.ids, attention_mask=attention_mask_for(model, tp.mask),
                                   position_ids=tp.pos, use_cache=True, **{name: cache}).logits  # [R, W, V]
                    return _picked(logits.reshape(-1, logits.shape[-1]), tp.pred, tp.target)

                lp, en = self._run(tail, tp.cost, *flat)
                logp, ent = logp.scatter(0, tp.out, lp), ent.scatter(0, tp.out, en)
        return logp.view(self.shape), ent.view(self.shape)

    def _run(self, fn: Any, cost: float, *args: torch.Tensor) -> Any:
        if cost > self.recompute and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            return checkpoint(fn, *args, use_reentrant=False)
        return fn(*args)


def _picked(logits: torch.Tensor, pred: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(target), entropy) at logits[pred], each [m]; the entropy carries no gradient."""
    lsm = torch.log_softmax(logits[pred].float(), -1)  # [m, V]
    with torch.no_grad():
        ent = -(lsm.exp() * lsm).sum(-1)
    return lsm.gather(-1, target.unsqueeze(-1)).squeeze(-1), ent


def _cache_kwarg(model: Any) -> str:
    """The forward's name for the KV cache: `cache` (transformers >= 5.2x) or `past_key_values`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the HF model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (keys, values), each [U, kvh, Pmax, D], from an HF DynamicCache of any 4.5x/5.x shape."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def _tail(t: Trajectory) -> list[int]:
    return list(itertools.chain.from_iterable(turn.token_ids for turn in t.turns))


def _long(values: Sequence[int], *shape: int) -> torch.Tensor:
    """int64 tensor of a flat sequence of ints (through `array`: torch.tensor on Python lists costs
    ~1 us an element), viewed as `shape`."""
    shape = shape or (len(values),)
    if not len(values):
        return torch.zeros(shape, dtype=torch.long)
    return torch.frombuffer(array("q", values), dtype=torch.long).clone().view(shape)


def split_passes(lengths: Sequence[int], prefix: int, keys_per_token: float, pass_tokens: float,
                 max_passes: int = 8) -> list[int]:
    """Boundaries 0 = b_0 < ... < b_k = n cutting `lengths` (sorted descending) into passes.

    A pass of rows [i, j) is padded to lengths[i]; its cost in token units is the tokens it
    runs, plus their attention over prefix + own keys (`keys_per_token` keys cost about one
    token's linear layers), plus `pass_tokens` for the forward's fixed overhead. Dynamic
    programming over at most 32 candidate cuts."""
    n = len(lengths)
    cuts = sorted({0, n} | {i for i in range(1, n) if lengths[i] != lengths[i - 1]})
    if len(cuts) > 33:
        cuts = sorted({cuts[round(k * (len(cuts) - 1) / 32)] for k in range(33)})

    def cost(i: int, j: int) -> float:
        w = lengths[cuts[i]]
        return (cuts[j] - cuts[i]) * w * (1 + (prefix + w) / keys_per_token) + pass_tokens

    m = len(cuts) - 1
    best = {(0, 0): (0.0, -1)}  # (passes, cut index) -> (cost, previous cut index)
    for k in range(1, max_passes + 1):
        for j in range(1, m + 1):
            opts = [(best[(k - 1, i)][0] + cost(i, j), i) for i in range(j) if (k - 1, i) in best]
            if opts:
                best[(k, j)] = min(opts)
    k = min((k for k in range(1, max_passes + 1) if (k, m) in best), key=lambda k: best[(k, m)][0])
    out, j = [], m
    while k:
        out.append(cuts[j])
        j = best[(k, j)][1]
        k -= 1
    return [0] + out[::-1]


def prefix_kv_batch(trajs: Sequence[Trajectory], targets: int, pad_id: int, keys_per_token: float = 1000.0,
                    pass_tokens: float = 256.0, max_passes: int = 8,
                    recompute: float = float("inf")) -> PrefixKVBatch | None:
    """The prefix-K/V layout of `trajs`, or None when no two of them share a prompt (no gain).
    Prompts are sorted by length and cut into prompt passes (`split_passes` again, with no
    prefix): a 2,600-token prompt among 300-token ones would otherwise pad every prompt, and
    every completion's prefix, to 2,600. Within a prompt pass, completions run one per row,
    sorted by length and cut into tail passes so padding and attention over padding stay
    small; `shared_layout` sets the cost constants from the model's shape."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(trajs):
        groups.setdefault(tuple(t.prompt_ids), []).append(i)
    if all(len(g) < 2 for g in groups.values()):
        return None
    tails = [_tail(t) for t in trajs]
    prompts = sorted(groups, key=lambda p: -len(p))
    plens = [len(p) for p in prompts]
    cuts = split_passes(plens, 0, keys_per_token, pass_tokens, max_passes)
    parts, cost = [], 0.0
    for a, b in zip(cuts, cuts[1:]):
        part, c = _prompt_pass(prompts[a:b], groups, trajs, tails, targets, pad_id, keys_per_token, pass_tokens,
                               max_passes)
        parts.append(part)
        cost += c
    return PrefixKVBatch(parts, (len(trajs), targets), cost, recompute)


def _prompt_pass(prompts: list[tuple[int, ...]], groups: dict[tuple[int, ...], list[int]],
                 trajs: Sequence[Trajectory], tails: list[list[int]], targets: int, pad_id: int,
                 keys_per_token: float, pass_tokens: float, max_passes: int) -> tuple[PromptPass, float]:
    """One prompt pass over `prompts` (and every sample of theirs), with its estimated cost;
    its output indices address the whole batch's [B, T] layout."""
    of_prompt = {i: u for u, p in enumerate(prompts) for i in groups[p]}
    Pm, U = max(len(p) for p in prompts), len(prompts)
    p_ids = torch.full((U, Pm), pad_id, dtype=torch.long)
    p_pos = torch.zeros((U, Pm), dtype=torch.long)
    p_real = torch.zeros((U, Pm), dtype=torch.bool)
    p_pos[:] = torch.arange(Pm)  # padding continues the positions: it comes after every real token
    for u, p in enumerate(prompts):
        p_ids[u, :len(p)] = torch.tensor(p, dtype=torch.long)
        p_real[u, :len(p)] = True
    order = sorted((i for i in of_prompt if tails[i]), key=lambda i: -len(tails[i]))
    lens = [len(tails[i]) for i in order]
    t = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    # tail token j of sample i is target P + j - 1 of the plain layout; token 0 is predicted by the prompt
    start = {i: i * targets + len(trajs[i].prompt_ids) - 1 for i in order}
    passes = []
    cuts = split_passes(lens, Pm, keys_per_token, pass_tokens, max_passes) if order else [0]
    cost = p_cost = U * Pm * (1 + Pm / keys_per_token)
    cost += pass_tokens
    for a, b in zip(cuts, cuts[1:]):
        rows = order[a:b]
        W, R = lens[a], len(rows)
        Pp = max(len(trajs[i].prompt_ids) for i in rows)
        ids, pos, n_real = [], [], []  # flat lists, one tensor each: a tensor op per row costs ~10 us
        pred, target, out = [], [], []
        for r, i in enumerate(rows):
            n, P = len(tails[i]), len(trajs[i].prompt_ids)
            ids += tails[i]
            ids += [pad_id] * (W - n)
            pos += range(P, P + n)
            pos += [0] * (W - n)
            n_real.append(n)
            pred += range(r * W, r * W + n - 1)
            target += tails[i][1:]
            out += range(start[i] + 1, start[i] + n)
        ids, pos = _long(ids, R, W), _long(pos, R, W)
        real = torch.arange(W)[None, :] < t(n_real)[:, None]  # [R, W]
        rp = t([of_prompt[i] for i in rows])
        own = (torch.tril(torch.ones(W, W, dtype=torch.bool)) & real[:, None, :]) | torch.eye(W, dtype=torch.bool)
        sees = p_real[rp][:, None, :Pp] & real[:, :, None]  # [R, W, Pp]; padding queries see only themselves
        mask = torch.cat((sees, own), dim=-1).unsqueeze(1)  # [R, 1, W, Pp + W]
        tp_cost = R * W * (1 + (Pp + W) / keys_per_token)
        passes.append(TailPass(rp, Pp, ids, mask, pos, _long(pred), _long(target), _long(out), tp_cost))
        cost += tp_cost + pass_tokens
    return PromptPass(p_ids, p_pos, t([len(p) - 1 for p in prompts])[:, None], t([of_prompt[i] for i in order]),
                      t([tails[i][0] for i in order]), t([start[i] for i in order]), passes, p_cost), cost


def dense_cost(trajs: Sequence[Trajectory], keys_per_token: float, pass_tokens: float) -> float:
    """The dense layout's work in the same token units: one forward, each group's row of n =
    P + its completions' tokens costing n * (1 + n / keys_per_token) (attention over the row)."""
    rows: dict[tuple[int, ...], int] = {}
    for t in trajs:
        rows[tuple(t.prompt_ids)] = rows.get(tuple(t.prompt_ids), len(t.prompt_ids)) + len(_tail(t))
    return sum(n * (1 + n / keys_per_token) for n in rows.values()) + pass_tokens


def cost_constants(model: Any) -> dict[str, float]:
    """`prefix_kv_batch`'s cost constants from the model's shape: one token's linear layers cost
    about as much as attention over hidden + 0.75 * intermediate keys (half the FLOP ratio: a
    masked SDPA runs at about half the matmuls' rate on CPU, fitted on the tiny model), and a
    pass's fixed overhead (HF's per-layer Python, forward and backward) about 1e8 * layers /
    parameters tokens (tiny model ~450), and at least 256: on SmolLM2-135M with LoRA, 3 passes
    of 4-6 rows (at the formula's 22) ran 0.58x the plain layout (benchmarks/rl_step_bench.py
    --smollm2), so small passes cost far more than their FLOPs say."""
    cfg = getattr(model, "config", None)
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    h, inter = getattr(cfg, "hidden_size", 1024), getattr(cfg, "intermediate_size", 4096)
    layers = getattr(cfg, "num_hidden_layers", 24)
    params = sum(p.numel() for p in model.parameters())
    return dict(keys_per_token=h + 0.75 * inter, pass_tokens=max(256.0, 1e8 * layers / max(params, 1)))


def shared_layout(name: str, model: Any, trajs: Sequence[Trajectory], targets: int, pad_id: int,
                  recompute: float = float("inf")) -> Any:
    """The shared-prefix batch `rl.prefix_layout` names, or None for the plain layout (no shared
    prompt, or attention that may ignore a custom mask). "kv": prefix_kv_batch; "dense":
    shared_prefix.share_prefixes; "auto": whichever the cost model says is cheaper (dense wins
    only on small batches, where kv's extra forwards cost more than its attention saves).
    "kv" and "auto" under gradient checkpointing become "dense": HF drops the cache inside
    checkpointed layers."""
    if name not in ("kv", "dense", "auto"):
        raise ValueError(f"rl.prefix_layout={name!r}: expected 'kv', 'dense' or 'auto'")
    if not can_share(model):
        return None
    checkpointed = getattr(model, "is_activation_checkpointing", None)  # transformers >= 5.2x; older name below
    if checkpointed if checkpointed is not None else getattr(model, "is_gradient_checkpointing", False):
        name = "dense"
    if name == "dense":
        return share_prefixes(trajs, targets, pad_id)
    k = cost_constants(model)
    kb = prefix_kv_batch(trajs, targets, pad_id, **k, recompute=recompute)
    if name == "auto" and kb is not None and kb.cost > dense_cost(trajs, **k):
        return share_prefixes(trajs, targets, pad_id)
    return kb
