"""The per-rank halves of a training step, registered as group handlers (group.py): the one
supervised loop's step (`supervised_step`, for every SupervisedObjective) and the RL update.

Every rank trains on its dp slice `items[dp_rank::dp]` of rank 0's global batch and scales
its loss so that FSDP's gradient average over dp equals the gradient of the global loss:

    local_loss * (local_units / global_units) * dp       # units: tokens or sequences

`units` is whatever the loss divides by: tokens for SFT and token-mean RL losses (dapo,
cispo), sequences for pairs (DPO) and sequence-mean RL losses (grpo, gspo, dr_grpo); an RL
loss declares its units where it registers (`@loss("dapo", units="tokens")`), plugins too. So 1,
2 or 4 ranks compute the same update up to float summation order. A rank whose slice is
empty still runs a forward/backward (on a zero-weighted copy), because FSDP's collectives
need every rank.

The RL update's KL term (rl.kl_coef > 0) is a token mean over the global minibatch whatever
the loss's units: each rank adds kl_coef * (its KL sum) / (the minibatch's tokens) * dp, the
reference logprobs coming from the sharded frozen reference (`ctx.ref`, session.py).

Limits: the asynchronous loop's off-policy correction is not applied here (config_check refuses it at world size > 1).
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import torch

from posttrain.parallel.group import RankContext, handler

def dp_slice(ctx: RankContext, items: Sequence[Any]) -> tuple[list[Any], float]:
    """This rank's items and their weight multiplier (0 when the slice is empty: a stand-in item)."""
    from posttrain.parallel.mesh import dp_info

    r, n = dp_info(ctx.mesh)
    mine = list(items[r::n])
    return (mine, 1.0) if mine else ([items[0]], 0.0)


def dp_sum(ctx: RankContext, values: list[float], op: str = "sum") -> list[float]:
    """Sum (or max) over the dp group: tp ranks hold the same numbers, so they are not counted twice."""
    import torch.distributed as dist

    from posttrain.parallel.mesh import dp_info

    t = torch.tensor(values, dtype=torch.float64)
    group = ctx.mesh["dp"].get_group() if "tp" in (ctx.mesh.mesh_dim_names or ()) else ctx.mesh.get_group()
    if dp_info(ctx.mesh)[1] > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM, group=group)
    return t.tolist()


def _begin(ctx: RankContext, lr: float) -> int:
    for g in ctx.opt.param_groups:  # rank 0's scheduler decides; every rank applies the same lr
        g["lr"] = lr
    ctx.opt.zero_grad(set_to_none=True)
    ctx.model.train()
    from posttrain.parallel.mesh import dp_info

    return dp_info(ctx.mesh)[1]


def metered(fn: Any) -> Any:
    """Run a step under the communication meter and the saved-tensor counter (accounting.py)."""

    from posttrain.parallel.accounting import SavedBytes

    @functools.wraps(fn)
    def run(ctx: RankContext, p: dict) -> dict:
        if not getattr(ctx.opts, "account", True):
            return fn(ctx, p)
        ctx.meter.reset()
        with ctx.meter, SavedBytes() as saved:
            out = fn(ctx, p)
        ctx.extra["activation_bytes"] = saved.bytes / max(1, len(ctx.meter.forwards))
        return out
    return run


def _finish(ctx: RankContext, max_norm: float) -> float:
    from posttrain.parallel.wrap import clip_grad_norm

    norm = clip_grad_norm([p for p in ctx.model.parameters() if p.requires_grad], max_norm)
    ctx.opt.step()
    return norm


@handler("supervised_step")
@metered
def supervised_step(ctx: RankContext, p: dict) -> dict:
    """p: objective (a SupervisedObjective without its data, train/supervised.py), items (rank 0's
    global batch), logged, lr, accum. The one-process trainer's step on this rank's dp slice: each
    micro-batch's share of the global loss, times dp (FSDP averages over dp), then summed over dp."""
    from posttrain.train.supervised import Batch

    dp = _begin(ctx, p["lr"])
    objective, batch, accum = p["objective"], Batch(p["items"], p["logged"]), p["accum"]
    mine, w = dp_slice(ctx, batch.items)
    sums: dict[str, float] = {"loss": 0.0}  # the same keys in the same order on every rank
    for k in range(accum):
        items = mine[k::accum]
        if not items:
            continue
        loss, stats = objective.loss(ctx.model, items, batch)
        (loss * dp * w).backward()
        for key, v in {"loss": float(loss.detach()), **stats}.items():
            sums[key] = sums.get(key, 0.0) + v * w
    norm = _finish(ctx, 1.0)
    return {**dict(zip(sums, dp_sum(ctx, list(sums.values())))), "grad_norm": norm}


@handler("rl_update")
@metered
def rl_update(ctx: RankContext, p: dict) -> dict:
    """p: trajs, adv [B], cfg (RLConfig), lr. `update.update_policy` on this rank's slices."""
    from posttrain.registry import registry
    from posttrain.train.batching import pack_trajectories
    from posttrain.train.update import SampleLayout

    cfg, trajs, adv = p["cfg"], p["trajs"], p["adv"]
    loss_fn = registry("loss").get(cfg.loss.name)
    kl_fn = functools.partial(registry("kl").get(cfg.kl_estimator.name), **cfg.kl_estimator.args) if cfg.kl_coef > 0 and ctx.ref is not None else None
    units = registry("loss").props(cfg.loss.name)["units"]  # declared by the loss: tokens or sequences
    n_mb = max(1, min(cfg.minibatches, len(trajs)))
    totals: dict[str, float] = {}
    for _epoch in range(cfg.update_epochs):
        for mb in torch.chunk(torch.arange(len(trajs)), n_mb):
            dp = _begin(ctx, p["lr"])
            glob = pack_trajectories([trajs[i] for i in mb.tolist()], ctx.extra["pad_id"])
            mine, w = dp_slice(ctx, mb.tolist())
            sub = [trajs[i] for i in mine]
            tb = pack_trajectories(sub, ctx.extra["pad_id"])
            layout = SampleLayout(ctx.model, sub, tb, ctx.extra["pad_id"], cfg)
            logp, ent_tok = layout.logprobs(ctx.model)
            loss, st = loss_fn(logp.float(), tb.old_logp, adv[mine], tb.loss_mask, **cfg.loss_kwargs())
            share = (float(tb.loss_mask.sum()) / max(float(glob.loss_mask.sum()), 1.0) if units == "tokens"
                     else len(sub) / len(mb)) * w
            total = loss * share
            kl_sum = 0.0
            if kl_fn is not None:  # this rank's share of the minibatch's token-mean KL to the reference
                with torch.no_grad():
                    ref = layout.logprobs(ctx.ref)[0].float()
                kl_tok = (kl_fn(logp.float(), ref) * tb.loss_mask).sum() * w
                total = total + cfg.kl_coef * kl_tok / max(float(glob.loss_mask.sum()), 1.0)
                kl_sum = float(kl_tok.detach())
            (total * dp).backward()
            norm = _finish(ctx, cfg.max_grad_norm)
            tok = float(tb.loss_mask.sum()) * w
            with torch.no_grad():
                ent = float((ent_tok * tb.loss_mask).sum()) * w
                mism = float(((logp - tb.old_logp).abs() * tb.loss_mask).max())
            s_loss, s_ent, s_clip, s_tok, s_kl = dp_sum(ctx, [float(loss.detach()) * share, ent,
                                                              st.get("clip_frac", 0.0) * tok, tok, kl_sum])
            row = {"loss": s_loss, "grad_norm": norm, "entropy": s_ent / max(s_tok, 1.0),
                   "logprob_mismatch": dp_sum(ctx, [mism], "max")[0], "clip_frac": s_clip / max(s_tok, 1.0)}
            if kl_fn is not None:  # as update_policy reports it: the loss includes kl_coef * kl
                row["kl"] = s_kl / max(float(glob.loss_mask.sum()), 1.0)
                row["loss"] += cfg.kl_coef * row["kl"]
            for k, v in row.items():
                totals[k] = totals.get(k, 0.0) + v / (n_mb * cfg.update_epochs)
    ctx.model.eval()
    return totals
