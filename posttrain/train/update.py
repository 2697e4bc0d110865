"""One policy-gradient update over a batch of scored trajectories.

    stats = update_policy(model, optimizer, trajs, adv, cfg, ref_model=None)

`adv` is one advantage per trajectory ([B]). Trajectories with an infrastructure error
are excluded before this call. The loss and KL estimator come from their registries by
the names in `cfg` (`rl.loss`, `rl.kl_estimator`); this file has no algorithm switch.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Sequence

import torch

from posttrain.config import RLConfig
from posttrain.registry import registry
from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.losses import entropy_from_logits
from posttrain.train.prefix_kv import shared_layout
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
        if cfg.share_prefix:  # rl.prefix_layout: kv (prompt K/V reused) or dense (one 4D-masked row)
            self.sb = shared_layout(cfg.prefix_layout, model, uniq, tb.loss_mask.shape[1], pad_id)
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


def update_policy(model: Any, opt: torch.optim.Optimizer, trajs: Sequence[Trajectory], adv: torch.Tensor,
                  cfg: RLConfig, pad_id: int, ref_model: Any | None = None, tcfg: Any = None,
                  correction: Any = None) -> dict[str, float]:
    """`tcfg` (the run's `trainer:` section) switches on bf16 autocast where configured. `correction`
    (the asynchronous loop, train/async_rl/correction.py): `correction(model, trajs, pad_id, cfg)` is
    called once before any step and returns `fn(mb, tb) -> (old_logp, mask, stats)` for each minibatch."""
    from posttrain.train.lora import autocast

    loss_fn = registry("loss").get(cfg.loss)
    kl_fn = registry("kl").get(cfg.kl_estimator) if cfg.kl_coef > 0 and ref_model is not None else None
    model.train()
    order = torch.arange(len(trajs))
    n_mb = max(1, min(cfg.minibatches, len(trajs)))
    totals: dict[str, float] = {}
    corr = correction(model, trajs, pad_id, cfg) if correction is not None else None
    for _epoch in range(cfg.update_epochs):
        for k_mb, mb in enumerate(torch.chunk(order, n_mb)):
            sub = [trajs[i] for i in mb.tolist()]
            tb = pack_trajectories(sub, pad_id)
            layout = SampleLayout(model, sub, tb, pad_id, cfg)
            with autocast(tcfg) if tcfg is not None else contextlib.nullcontext():
                logp, ent_tok = layout.logprobs(model)  # [b, L-1] each
            logp = logp.float()
            old_logp, loss_mask, cst = (tb.old_logp, tb.loss_mask, {}) if corr is None else corr(mb, tb)
            loss, st = loss_fn(logp, old_logp, adv[mb], loss_mask, **cfg.loss_kwargs())
            st.update(cst)
            if kl_fn is not None:
                with torch.no_grad():
                    ref_logp = layout.logprobs(ref_model)[0]
                kl = (kl_fn(logp, ref_logp) * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1)
                loss = loss + cfg.kl_coef * kl
                st["kl"] = float(kl)
            if not math.isfinite(float(loss.detach())):
                raise NonFiniteLoss(f"non-finite loss {float(loss.detach())} on minibatch {k_mb} (epoch {_epoch}) of tasks "
                                    f"{[t.task_id for t in sub[:4]]}")
            opt.zero_grad(set_to_none=True)
            (loss / 1.0).backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            opt.step()
            with torch.no_grad():
                ent = (ent_tok * tb.loss_mask).sum() / tb.loss_mask.sum().clamp(min=1)
                mismatch = ((logp - tb.old_logp).abs() * tb.loss_mask).max()
            for k, v in {"loss": float(loss.detach()), "grad_norm": float(gnorm), "entropy": float(ent),
                         "logprob_mismatch": float(mismatch), **st}.items():
                totals[k] = totals.get(k, 0.0) + v / (n_mb * cfg.update_epochs)
    model.eval()
    return totals
