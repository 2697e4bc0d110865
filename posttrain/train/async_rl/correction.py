"""The off-policy correction as `update_policy` takes it: trainer logprobs once, weights per minibatch.

    corr = correction_for(cfg.rl.offpolicy)           # None for rl.max_staleness = 0
    update_policy(..., correction=corr)

Before the first optimizer step of an update, the trainer's own logprobs of every sampled
token are computed under the weights it is about to change (no gradient; [B, L-1]). Each
minibatch then takes its PPO ratio against those (the proximal policy) and gets the
registered correction's weight of trainer vs behaviour (engine) logprobs as its loss mask.
Stats (means over the update's minibatches, logged as train/offpolicy/*): mean |delta logp|
and the k3 KL estimate of trainer vs engine, and the shares of tokens clipped or masked.

Limits: one extra forward over the batch per update (about a third of an update's cost).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from posttrain.registry import registry
from posttrain.train.batching import pack_trajectories
from posttrain.train.offpolicy import mismatch_stats
from posttrain.types import Trajectory

MinibatchCorrection = Callable[[torch.Tensor, Any], tuple[torch.Tensor, torch.Tensor, dict[str, float]]]


def correction_for(offpolicy_cfg: Any) -> Callable[..., MinibatchCorrection]:
    """The `correction` argument of update_policy for `rl.offpolicy` (name + args)."""
    fn = registry("offpolicy").get(offpolicy_cfg.name)
    args = dict(offpolicy_cfg.args)

    def prepare(model: Any, trajs: Sequence[Trajectory], pad_id: int, cfg: Any) -> MinibatchCorrection:
        from posttrain.train.update import policy_logprobs

        tb = pack_trajectories(trajs, pad_id)
        with torch.no_grad():
            prox = policy_logprobs(model, trajs, tb, pad_id, cfg)[0].float()  # [B, L-1]

        def per_minibatch(mb: torch.Tensor, tbm: Any) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
            width = tbm.loss_mask.shape[1]  # a minibatch is padded to its own longest row: a column prefix
            p = prox[mb][:, :width]  # [b, W]
            c = fn(p, tbm.old_logp, tbm.loss_mask, **args)
            stats = {f"offpolicy/{k}": v for k, v in mismatch_stats(p, tbm.old_logp, tbm.loss_mask).items()}
            stats.update({"offpolicy/clipped_frac": c.clipped_frac, "offpolicy/masked_frac": c.masked_frac})
            return p, c.weight, stats

        return per_minibatch

    return prepare
