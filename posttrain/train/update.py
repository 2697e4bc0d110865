"""One policy-gradient update over a batch of scored trajectories.

    stats = update_policy(model, optimizer, trajs, adv, cfg, ref_model=None)

`adv` is one advantage per trajectory ([B]). Trajectories with an infrastructure error
are excluded before this call. The loss and KL estimator come from their registries by
the names in `cfg` (`rl.loss.name`, `rl.kl_estimator.name`); this file has no algorithm switch.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any, Sequence

import torch

from posttrain.config import RLConfig
from posttrain.registry import registry
from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.loss_norm import StepCounts, denominator
from posttrain.train.losses import LOSSES, entropy_from_logits
from posttrain.train.prefix_kv import shared_layout
from posttrain.train.update_memory import micro_token_limit
from posttrain.train.shared_prefix import can_share
from posttrain.train.varlen import usable as varlen_usable, varlen_batch, varlen_pass_tokens
from posttrain.errors import PosttrainError
from posttrain.types import Trajectory


class NonFiniteLoss(PosttrainError, RuntimeError):
    """A NaN/inf loss: the run stops (printed as one line) and keeps its last good checkpoint."""


def unique_samples(trajs: Sequence[Trajectory]) -> tuple[list[Trajectory], torch.Tensor]:
    """The distinct samples (same task, prompt and turns, token for token) and, for each input,
    the index of its distinct copy: [b]. A low-entropy policy repeats itself; a GRPO group of 8
    held ~4 distinct answers in the trainer benchmark."""
    seen: dict[tuple, int] = {}
    uniq: list[Trajectory] = []
    inv = []
    for t in trajs:
        key = (t.task_version, t.prompt_ids, tuple((x.role, x.trainable, x.token_ids) for x in t.turns))
        if key not in seen:
            seen[key] = len(uniq)
            uniq.append(t)
        inv.append(seen[key])
    return uniq, torch.tensor(inv, dtype=torch.long)


class SampleLayout:
    """How a minibatch's samples reach the model, built once and used for the policy and the
    reference alike: identical samples computed once and indexed back out (`rl.dedup_samples`:
    their logprobs are the same numbers, and indexing sums their gradients exactly as separate
    rows would); a group's prompt computed once (`rl.share_prefix`, prefix_kv.py); image
    inputs in the plain layout, one row per sample."""

    def __init__(self, model: Any, sub: Sequence[Trajectory], tb: Any, pad_id: int, cfg: RLConfig) -> None:
        self.tb, self.sb, self.tu = tb, None, tb
        self.inv = torch.arange(len(sub))
        if tb.model_inputs:
            return
        uniq = list(sub)
        if cfg.dedup_samples:
            uniq, self.inv = unique_samples(sub)
        if cfg.share_prefix and cfg.prefix_layout == "varlen" and varlen_usable(model):  # one flat row (varlen.py)
            self.sb = varlen_batch(uniq, tb.loss_mask.shape[1], pad_id, pass_tokens=varlen_pass_tokens(model)) \
                if can_share(model) else None
        elif cfg.share_prefix:  # rl.prefix_layout: kv (prompt K/V reused) or dense (one 4D-masked row)
            name = "dense" if cfg.prefix_layout == "varlen" else cfg.prefix_layout  # varlen under checkpointing
            self.sb = shared_layout(name, model, uniq, tb.loss_mask.shape[1], pad_id,
                                    recompute=micro_token_limit(model, cfg.micro_tokens) or float("inf"))
        if self.sb is None and len(uniq) < len(sub):
            self.tu = pack_trajectories(uniq, pad_id)  # same width as tb: the longest sample is kept

    def logprobs(self, model: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p, entropy) of every token under `model`, both [b, L-1] in `tb`'s layout."""
        if self.sb is not None:
            lu, eu = self.sb.logprobs(model)  # [u, L-1]
        else:
            tu = self.tu
            lu, logits = token_logprobs(model, tu.input_ids, tu.attention_mask, with_logits=True, **tu.model_inputs)
            with torch.no_grad():
                eu = entropy_from_logits(logits)
        return lu[self.inv], eu[self.inv]


def policy_logprobs(model: Any, sub: Sequence[Trajectory], tb: Any, pad_id: int,
                    cfg: RLConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """`SampleLayout(...).logprobs(model)` for a one-off call."""
    return SampleLayout(model, sub, tb, pad_id, cfg).logprobs(model)


def micro_batches(sub: Sequence[Trajectory], micro_tokens: int) -> list[list[int]]:
    """`sub`'s indices cut into micro-batches of about `micro_tokens` tokens each (`rl.micro_tokens`;
    0: one micro-batch). A group's prompt counts once, as the shared layouts run it, and a group
    is never cut: a piece would run its prompt again (cutting groups made a step with a 2,591-
    token prompt 2.2x slower: docs/benchmarks.md), so a group larger than the limit is a micro-batch alone."""
    if micro_tokens <= 0:
        return [list(range(len(sub)))]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(sub):
        groups.setdefault(tuple(t.prompt_ids), []).append(i)
    out, cur, used = [], [], 0
    for prompt, idx in groups.items():
        n = len(prompt) + sum(len(x.token_ids) for i in idx for x in sub[i].turns)
        if cur and used + n > micro_tokens:
            out.append(cur)
            cur, used = [], 0
        cur += idx
        used += n
    return out + [cur] if cur else out


# The update's time split, in its returned stats (seconds summed over minibatches); the loops log
# them as time/forward_s, time/backward_s, time/optimizer_s (`metric_name`).
UPDATE_CLOCK = ("forward_s", "backward_s", "optimizer_s")


def metric_name(stat: str) -> str:
    """Where an update stat goes in a metrics row: time/ for the clock, train/ for the rest."""
    return f"time/{stat}" if stat in UPDATE_CLOCK else f"train/{stat}"


def update_policy(model: Any, opt: torch.optim.Optimizer, trajs: Sequence[Trajectory], adv: torch.Tensor,
                  cfg: RLConfig, pad_id: int, ref_model: Any | None = None, tcfg: Any = None,
                  correction: Any = None, counts: StepCounts | None = None) -> dict[str, float]:
    """`counts` (loss_norm.step_counts: the step's sampled and kept samples and tokens) sets the
    token-mean denominator of `rl.loss_norm`; None: each minibatch's own tokens. `tcfg` (the run's
    `trainer:` section) switches on bf16 autocast where configured. `correction`
    (the asynchronous loop, train/async_rl/correction.py): `correction(model, trajs, pad_id, cfg)` is
    called once before any step and returns `fn(mb, tb) -> (old_logp, mask, stats)` for each minibatch.

    Each minibatch is one optimizer step. With `rl.micro_tokens` (by default `auto`: about 2 GiB
    of activations, update_memory.py), its forward and backward run in micro-batches and the
    gradients accumulate, so activations are held for one micro-batch at a time (on SmolLM2 with
    LoRA, 2-2.6 MB a token). A micro-batch's loss is the minibatch's loss with
    the other rows' logprobs held constant (their old logprobs stand in): its gradient is that
    micro-batch's exact share for a loss that is a sum over rows with mask-only normalisers,
    which every built-in loss is (tests/unit/train/test_micro_batches.py checks each). The
    loss and its statistics are then computed once over the whole minibatch's logprobs.

    `rl.old_logprobs=recompute` (bf16 rollouts): the ratio's old logprobs are the trainer's own
    at the rollout weights (fp32, or bf16 autocast under `trainer.precision`: the same numerics as
    the new ones), never the engine's, so the engine's rounding never enters the loss;
    `rollout_logprob_gap` reports the mean gap it corrected. With `rl.rollout_correction` the
    caller passes `rl.offpolicy`'s `correction` (trainer.py does) and its pass is the recompute:
    the ratio is taken against it and each token is weighted by the correction (TIS) of it
    against the engine's logprobs. `correction` runs under the update's autocast."""
    from posttrain.train.lora import autocast

    loss_fn = LOSSES.get(cfg.loss.name)
    kl_fn = functools.partial(registry("kl").get(cfg.kl_estimator.name), **cfg.kl_estimator.args) if cfg.kl_coef > 0 and ref_model is not None else None
    model.train()
    order = torch.arange(len(trajs))
    n_mb = max(1, min(cfg.minibatches, len(trajs)))
    totals: dict[str, float] = {}
    recompute = cfg.old_logprobs == "recompute"
    t_plan = time.perf_counter()
    with autocast(tcfg):  # the update's own numerics
        corr = correction(model, trajs, pad_id, cfg) if correction is not None else None
    fused, behaviour = _behaviour_plan(model, trajs, torch.chunk(order, n_mb), corr, pad_id, cfg, tcfg)
    # seconds in each part of the update, summed over its minibatches (the step's time split):
    # forward = logprobs, loss and any recompute pass; backward; optimizer = clip + step
    clock = dict.fromkeys(UPDATE_CLOCK, 0.0)
    clock["forward_s"] = time.perf_counter() - t_plan
    for _epoch in range(cfg.update_epochs):
        for k_mb, mb in enumerate(torch.chunk(order, n_mb)):
            sub = [trajs[i] for i in mb.tolist()]
            tb = pack_trajectories(sub, pad_id)
            old_logp, loss_mask, cst = (tb.old_logp, tb.loss_mask, {}) if corr is None else corr(mb, tb)
            if behaviour is not None:
                old_logp = behaviour[k_mb]
            where = f"minibatch {k_mb} (epoch {_epoch}) of tasks {[t.task_id for t in sub[:4]]}"
            opt.zero_grad(set_to_none=True)
            denom = denominator(cfg.loss_norm, loss_mask, counts, cfg.max_new_tokens)
            kw = {**cfg.loss_kwargs(), **({"denom": denom} if denom is not None else {})}
            logp, ent_tok, kl, loss_st, old_logp = _forward_backward(model, sub, tb, adv[mb], old_logp, loss_mask, cfg,
                                                                     pad_id, loss_fn, kl_fn, ref_model, tcfg, where,
                                                                     kw, fused, clock)
            if loss_st is None:  # micro-batched: the loss and its statistics over the whole minibatch
                with torch.no_grad():
                    loss_st = loss_fn(logp, old_logp, adv[mb], loss_mask, **kw)
            loss, st = loss_st
            loss = loss.detach()
            st.update(cst)
            if kl is not None:
                loss = loss + cfg.kl_coef * kl
                st["kl"] = float(kl)
            t_opt = time.perf_counter()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            opt.step()
            clock["optimizer_s"] += time.perf_counter() - t_opt
            with torch.no_grad():
                ent = (ent_tok * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1)
                mismatch = ((logp - tb.old_logp).abs() * tb.loss_mask).max()
                if recompute:  # what the recompute corrected: the engine's logprobs against the fp32 ones
                    st["rollout_logprob_gap"] = float(((old_logp - tb.old_logp).abs() * tb.loss_mask).sum()
                                                      / tb.loss_mask.sum().clamp(min=1))
            for k, v in {"loss": float(loss), "grad_norm": float(gnorm), "entropy": float(ent),
                         "logprob_mismatch": float(mismatch), "loss_denom": float(denom or loss_mask.sum()),
                         **st}.items():
                totals[k] = totals.get(k, 0.0) + v / (n_mb * cfg.update_epochs)
    model.eval()
    return {**totals, **clock}


def _behaviour_plan(model: Any, trajs: Sequence[Trajectory], chunks: Sequence[torch.Tensor], corr: Any,
                    pad_id: int, cfg: RLConfig, tcfg: Any = None) -> tuple[bool, list[torch.Tensor] | None]:
    """(fused, per-minibatch old logprobs) for rl.old_logprobs=recompute; (False, None) for engine.
    One minibatch and one epoch: the update's own forward runs at the rollout weights, so its
    detached logprobs are the recompute (fused, no extra forward); else one no-grad pass first."""
    if cfg.old_logprobs != "recompute" or (corr is not None and cfg.rollout_correction):
        return False, None  # the engine's logprobs, or the rollout correction's pass is the recompute
    if corr is not None:
        raise ValueError("rl.old_logprobs=recompute with an off-policy correction: the recompute is the "
                         "current weights' logprobs, not the older behaviour policy's")
    if len(chunks) == 1 and cfg.update_epochs == 1:
        return True, None
    return False, recompute_old_logprobs(model, [[trajs[i] for i in mb.tolist()] for mb in chunks], pad_id, cfg,
                                         tcfg)


def recompute_old_logprobs(model: Any, minibatches: Sequence[Sequence[Trajectory]], pad_id: int,
                           cfg: RLConfig, tcfg: Any = None) -> list[torch.Tensor]:
    """Logprobs [b, L-1] (fp32 tensors) of each minibatch's tokens under `model` as it is now (the
    weights the rollouts were sampled with), in eval mode, micro-batch by micro-batch
    (`rl.micro_tokens`) so no more activations are held than the update holds. They are computed
    as the update computes its own: in fp32, or under bf16 autocast where `tcfg` (the run's
    `trainer:`) says so, so the ratio's two sides share their numerics and start at exactly 1."""
    from posttrain.train.lora import autocast

    was_training = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for sub in minibatches:
            tb = pack_trajectories(sub, pad_id)
            full = torch.zeros_like(tb.old_logp)
            chunks = micro_batches(sub, micro_token_limit(model, cfg.micro_tokens)) if not tb.model_inputs else [list(range(len(sub)))]
            for idx in chunks:
                part = [sub[i] for i in idx]
                tbm = tb if len(idx) == len(sub) else pack_trajectories(part, pad_id)
                with autocast(tcfg):
                    lp = SampleLayout(model, part, tbm, pad_id, cfg).logprobs(model)[0].float()
                full[torch.tensor(idx), :lp.shape[1]] = lp
            out.append(full)
    model.train(was_training)
    return out


def _forward_backward(model: Any, sub: Sequence[Trajectory], tb: Any, adv: torch.Tensor, old_logp: torch.Tensor,
                      loss_mask: torch.Tensor, cfg: RLConfig, pad_id: int, loss_fn: Any, kl_fn: Any,
                      ref_model: Any, tcfg: Any, where: str, loss_kw: dict[str, Any],
                      fused_recompute: bool = False,
                      clock: dict[str, float] | None = None) -> tuple[torch.Tensor, torch.Tensor, Any, Any, torch.Tensor]:
    """Gradients of the minibatch's loss accumulated into the parameters, micro-batch by micro-batch;
    returns the minibatch's (logp, entropy) [b, L-1], detached, the KL term (None without one),
    the loss function's (loss, stats) when one micro-batch was the whole minibatch (else None), and
    the old logprobs the loss used. `fused_recompute`: each micro-batch's old logprobs are its own
    forward's, detached (the weights are still the rollout weights: rl.old_logprobs=recompute)."""
    from posttrain.train.lora import autocast

    if fused_recompute:
        old_logp = old_logp.detach().clone()
    chunks = micro_batches(sub, micro_token_limit(model, cfg.micro_tokens)) if not tb.model_inputs else [list(range(len(sub)))]
    logp_all, ent_all = torch.zeros_like(tb.old_logp), torch.zeros_like(tb.old_logp)
    ref_all = torch.zeros_like(tb.old_logp) if kl_fn is not None else None
    for idx in chunks:
        t_fwd = time.perf_counter()
        whole = len(idx) == len(sub)
        part = sub if whole else [sub[i] for i in idx]
        tbm = tb if whole else pack_trajectories(part, pad_id)
        layout = SampleLayout(model, part, tbm, pad_id, cfg)
        with autocast(tcfg):
            lp, ent = layout.logprobs(model)  # [m, Lm-1] each
        lp = lp.float()
        rows, width = torch.tensor(idx), lp.shape[1]
        if fused_recompute:
            old_logp[rows, :width] = lp.detach()
        if whole:
            full = lp
        else:  # the other rows' old logprobs stand in: constants, so no gradient reaches them
            full = old_logp.detach().clone()
            full[rows, :width] = lp
        out = loss_fn(full, old_logp, adv, loss_mask, **loss_kw)  # (loss, stats)
        loss = out[0]
        if kl_fn is not None:
            with torch.no_grad():
                ref = layout.logprobs(ref_model)[0].float()
            ref_full = ref if whole else full.detach().clone()
            if not whole:
                ref_full[rows, :width] = ref
            ref_all[rows, :width] = ref
            loss = loss + cfg.kl_coef * (kl_fn(full, ref_full) * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1)
        if not math.isfinite(float(loss.detach())):
            raise NonFiniteLoss(f"non-finite loss {float(loss.detach())} on {where}")
        t_back = time.perf_counter()
        loss.backward()
        if clock is not None:
            clock["backward_s"] += time.perf_counter() - t_back
            clock["forward_s"] += t_back - t_fwd
        logp_all[rows, :width] = lp.detach()
        ent_all[rows, :width] = ent.detach().to(ent_all.dtype)
    kl = None
    if kl_fn is not None:
        with torch.no_grad():
            kl = (kl_fn(logp_all, ref_all) * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1)
    return logp_all, ent_all, kl, (out if len(chunks) == 1 else None), old_logp
