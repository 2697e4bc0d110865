"""Advantage estimators: pure functions from group rewards to per-sample advantages.

Input `rewards` is [G, n]: G groups (one prompt each), n samples per group. Output has
the same shape. Each estimator registers by name; the RL config picks one with
`rl.advantage`. Hand-computed checks live in tests/unit/train/test_advantages.py.
"""

from __future__ import annotations

import torch

from posttrain.registry import advantage

EPS = 1e-6


@advantage("group_norm")
def group_norm(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO: (r - mean_g) / (std_g + eps), std unbiased as in TRL."""
    mean = rewards.mean(dim=1, keepdim=True)  # [G, 1]
    std = rewards.std(dim=1, keepdim=True) if rewards.shape[1] > 1 else torch.zeros_like(mean)
    return (rewards - mean) / (std + EPS)  # [G, n]


@advantage("group_mean")
def group_mean(rewards: torch.Tensor) -> torch.Tensor:
    """Dr. GRPO: r - mean_g, no std scaling (avoids up-weighting low-variance groups)."""
    return rewards - rewards.mean(dim=1, keepdim=True)  # [G, n]


@advantage("rloo")
def rloo(rewards: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out: r_i - mean_{j != i} r_j = n/(n-1) * (r_i - mean_g)."""
    n = rewards.shape[1]
    if n < 2:
        return torch.zeros_like(rewards)
    return (rewards - rewards.mean(dim=1, keepdim=True)) * (n / (n - 1))  # [G, n]


@advantage("reinforce_pp")
def reinforce_pp(rewards: torch.Tensor) -> torch.Tensor:
    """REINFORCE++ with a group baseline: subtract the group mean, normalise over the batch."""
    a = rewards - rewards.mean(dim=1, keepdim=True)  # [G, n]
    flat = a.flatten()
    std = flat.std() if flat.numel() > 1 else torch.tensor(0.0)
    return (a - flat.mean()) / (std + EPS)
