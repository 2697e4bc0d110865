"""Sampling policies: pure functions from pass-rate statistics to task weights.

    @sched_policy("name")
    def name(view: StatsView, step: int, **args) -> np.ndarray   # [N] weights >= 0

A policy sees a snapshot (`StatsView`) and the scheduler step, and returns one
non-negative weight per task. It holds no state, so a resumed run that restores the
statistics reproduces its weights exactly. The scheduler normalises weights within each
domain (the config's mixture fixes the domain shares) and samples difficulty buckets
by their weight mass, then tasks within a bucket.

Built-ins:
- `uniform`: every task alike (the baseline every framework ships).
- `learning_signal` (default): expected group-reward variance E[p(1-p)] under the Beta
  posterior, with an exploration floor; tasks reliably solved are retired and revisited
  every `revisit_every` steps to catch forgetting.
- `difficulty_pools`: prime-rl style easy / normal / hard pools with fixed shares.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from posttrain.registry import sched_policy
from posttrain.schedule.stats import StatsView


class SchedulePolicy(Protocol):
    """Pass-rate statistics -> one weight >= 0 per task, [N]; stateless (see the module doc)."""

    def __call__(self, view: StatsView, step: int, **args: Any) -> np.ndarray: ...


@sched_policy("uniform")
def uniform(view: StatsView, step: int) -> np.ndarray:
    return np.ones(len(view.alpha))


def expected_signal(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """E[p(1-p)] for p ~ Beta(alpha, beta), scaled so that p = 1/2 (certain) gives 1.

    E[p(1-p)] = alpha*beta / ((alpha+beta)(alpha+beta+1)); dividing by its supremum 1/4
    maps it to [0, 1). Uncertainty lowers it a little (an unseen task is worth ~2/3 of a
    certain 50% task), which is what keeps exploration from swamping exploitation.
    """
    n = alpha + beta
    return 4.0 * alpha * beta / (n * (n + 1.0))


def retired_mask(view: StatsView, retire_at: float, retire_evidence: float) -> np.ndarray:
    """[N] bool: posterior mean >= retire_at, backed by >= retire_evidence observations."""
    return (view.mean >= retire_at) & (view.evidence >= retire_evidence)


@sched_policy("learning_signal")
def learning_signal(view: StatsView, step: int, *, floor: float = 0.05, retire_at: float = 0.9,
                    retire_evidence: float = 6.0, revisit_every: int = 50,
                    revisit_weight: float = 0.5) -> np.ndarray:
    """Weight = floor + (1 - floor) * E[p(1-p)]/max; retired tasks 0 until a revisit is due."""
    for name, v in (("floor", floor), ("retire_at", retire_at), ("revisit_weight", revisit_weight)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"learning_signal {name} must be in [0, 1], got {v}")
    if revisit_every < 1:
        raise ValueError(f"learning_signal revisit_every must be >= 1, got {revisit_every}")
    w = floor + (1.0 - floor) * expected_signal(view.alpha, view.beta)  # [N]
    retired = retired_mask(view, retire_at, retire_evidence)
    due = retired & (step - view.last_step >= revisit_every)
    w = np.where(retired, 0.0, w)
    return np.where(due, revisit_weight, w)


@sched_policy("difficulty_pools")
def difficulty_pools(view: StatsView, step: int, *, easy_at: float = 0.9, hard_at: float = 0.1,
                     min_evidence: float = 4.0, easy_share: float = 0.05,
                     hard_share: float = 0.1) -> np.ndarray:
    """Pools by posterior pass rate; each pool gets a fixed share of its domain's draws.

    An empty pool's share goes to the others in proportion, so shares always sum to 1.
    """
    if easy_share < 0 or hard_share < 0 or easy_share + hard_share > 1:
        raise ValueError(f"difficulty_pools shares must be >= 0 and sum <= 1, got {easy_share}, {hard_share}")
    known = view.evidence >= min_evidence
    pool = np.ones(len(view.alpha), dtype=np.int64)  # 0 easy, 1 normal, 2 hard
    pool[known & (view.mean >= easy_at)] = 0
    pool[known & (view.mean <= hard_at)] = 2
    shares = np.array([easy_share, 1.0 - easy_share - hard_share, hard_share])
    w = np.zeros(len(view.alpha))
    for d in np.unique(view.domain):
        in_d = view.domain == d
        counts = np.bincount(pool[in_d], minlength=3).astype(float)  # [3]
        s = np.where(counts > 0, shares, 0.0)
        if s.sum() == 0:  # every non-empty pool has share 0: fall back to uniform
            s = (counts > 0).astype(float)
        per_task = s / s.sum() / np.maximum(counts, 1.0)  # [3]
        w[in_d] = per_task[pool[in_d]]
    return w
