"""Advantage estimators: pure functions from a batch of group rewards to per-sample advantages.

Every estimator is called ONCE per step on the whole batch:

    rewards [G, n]  G groups (one prompt each), padded to the largest group's n samples
    mask    [G, n]  True where a sample is scored; False for padding, infra errors, and every
                    sample of a group with fewer scored samples than the estimator's declared
                    `min_group` (no baseline)
    ->      [G, n]  advantages; exactly 0 wherever mask is False

so a batch-level estimator (`reinforce_pp`, declared `scope="batch"`) really normalises
over the batch; a `scope="group"` one gives each group what it would give it alone (tested). Masked
entries never enter a mean or a std. `estimate_advantages` builds the padded batch from
trajectories and flattens the result back (group-major). The RL config picks an estimator
with `rl.advantage`. Hand-computed checks live in tests/unit/train/test_advantages.py.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

import torch

from posttrain.registry import Registry, advantage, registry
from posttrain.types import Trajectory

EPS = 1e-6


class AdvantageEstimator(Protocol):
    """rewards [G, n], mask [G, n] -> advantages [G, n], 0 where mask is False."""

    def __call__(self, rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor: ...


ADVANTAGES: Registry[AdvantageEstimator] = registry("advantage")  # the typed "advantage" extension point


def _group_stats(rewards: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per group over the masked entries: (count, mean, unbiased std), each [G, 1]; std is 0 below 2 samples."""
    m = mask.to(rewards.dtype)  # [G, n]
    count = m.sum(dim=1, keepdim=True)  # [G, 1]
    mean = (rewards * m).sum(dim=1, keepdim=True) / count.clamp(min=1)  # [G, 1]
    var = (((rewards - mean) * m) ** 2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)  # [G, 1]
    return count, mean, torch.where(count > 1, var.sqrt(), torch.zeros_like(var))


@advantage("group_norm", min_group=2, scope="group")
def group_norm(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GRPO: (r - mean_g) / (std_g + eps), std unbiased as in TRL."""
    _, mean, std = _group_stats(rewards, mask)
    return torch.where(mask, (rewards - mean) / (std + EPS), 0.0)  # [G, n]


@advantage("group_mean", min_group=2, scope="group")
def group_mean(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Dr. GRPO: r - mean_g, no std scaling (avoids up-weighting low-variance groups)."""
    _, mean, _ = _group_stats(rewards, mask)
    return torch.where(mask, rewards - mean, 0.0)  # [G, n]


@advantage("rloo", min_group=2, scope="group")
def rloo(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out: r_i - mean_{j != i} r_j = k/(k-1) * (r_i - mean_g), k scored samples."""
    count, mean, _ = _group_stats(rewards, mask)
    scale = torch.where(count > 1, count / (count - 1).clamp(min=1), 0.0)  # [G, 1]
    return torch.where(mask, (rewards - mean) * scale, 0.0)  # [G, n]


@advantage("reinforce_pp", min_group=2, scope="batch")
def reinforce_pp(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """REINFORCE++ with a group baseline: subtract the group mean, normalise over the whole batch."""
    _, mean, _ = _group_stats(rewards, mask)
    centred = torch.where(mask, rewards - mean, 0.0)  # [G, n]
    flat = centred[mask]  # [N] the batch's scored samples only
    if flat.numel() < 2:
        return torch.zeros_like(rewards)
    return torch.where(mask, (centred - flat.mean()) / (flat.std() + EPS), 0.0)  # [G, n]


def padded_rewards(groups: Sequence[Sequence[Trajectory]], min_group: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(rewards [G, n_max], mask [G, n_max]) of a step's groups; see the module docstring for the mask."""
    n_max = max((len(g) for g in groups), default=0)
    rewards = torch.zeros(len(groups), n_max)
    mask = torch.zeros(len(groups), n_max, dtype=torch.bool)
    for i, g in enumerate(groups):
        scored = [j for j, t in enumerate(g) if not t.infra_error]
        if len(scored) < max(1, min_group):  # no baseline: the whole group stays out
            continue
        for j in scored:
            rewards[i, j], mask[i, j] = g[j].reward, True
    return rewards, mask


def estimate_advantages(groups: Sequence[Sequence[Trajectory]], name: str,
                        args: Mapping[str, Any] | None = None) -> torch.Tensor:
    """One advantage per trajectory ([B], flattened group-major, B = sum of group sizes): ONE call of
    the estimator over the padded batch; infra errors and baseline-less groups get 0. `args`: the
    estimator's keyword arguments (rl.advantage.args)."""
    if not groups:
        return torch.zeros(0)
    rewards, mask = padded_rewards(groups, ADVANTAGES.props(name)["min_group"])  # [G, n_max] each
    adv = ADVANTAGES.get(name)(rewards, mask, **(args or {}))  # [G, n_max]
    return torch.cat([adv[i, : len(g)] for i, g in enumerate(groups)])  # [B]


def trained_advantages(trajs: Sequence[Trajectory], trained: Sequence[Trajectory],
                       adv: torch.Tensor) -> list[float | None]:
    """The advantage each of `trajs` was trained with, for the store: None for a trajectory the
    update did not use (an infra error, or a group the scheduler dropped). `trained` [B] pairs with `adv` [B]."""
    by_traj = {id(t): float(a) for t, a in zip(trained, adv.tolist()) if not t.infra_error}
    return [by_traj.get(id(t)) for t in trajs]
