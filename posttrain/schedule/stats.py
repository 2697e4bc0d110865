"""Pass-rate statistics per task and per difficulty bucket.

A task's pass rate is a Beta posterior whose prior is centred on its bucket's pooled
pass rate, so a task never attempted borrows strength from its neighbours (same domain,
similar `task.difficulty`) instead of starting from an uninformed 1/2. Evidence decays
geometrically each time a task is observed again, so the posterior tracks a learner
whose pass rate moves (it improves, or forgets).

Rewards in [0, 1] count fractionally: a reward r adds r to the successes and 1 - r to
the failures. Trajectories whose verifier reported `infra_error` are not evidence about
the model and are skipped (see DESIGN.md: failures are data, never a score of 0).

Does not: model correlations between tasks beyond the shared bucket prior, or weight
evidence by the policy version that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from posttrain.types import Task


def difficulty_buckets(tasks: Sequence[Task], n_buckets: int) -> list[int]:
    """Bucket index per task: quantiles of `task.difficulty` within each domain.

    A domain with at most `n_buckets` distinct difficulties gets one bucket per value, so
    an integer difficulty knob maps to buckets exactly; ties never straddle two buckets.
    """
    out = [0] * len(tasks)
    by_domain: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        by_domain.setdefault(t.domain, []).append(i)
    for idx in by_domain.values():
        values = sorted({float(tasks[i].difficulty) for i in idx})
        if len(values) <= n_buckets:
            rank = {v: r for r, v in enumerate(values)}
            for i in idx:
                out[i] = rank[float(tasks[i].difficulty)]
            continue
        diffs = np.array([float(tasks[i].difficulty) for i in idx])
        # Interior quantile edges; searchsorted(side="right") keeps equal values together.
        edges = np.quantile(diffs, np.linspace(0, 1, n_buckets + 1)[1:-1])
        for i, b in zip(idx, np.searchsorted(edges, diffs, side="right")):
            out[i] = int(b)
    return out


@dataclass(frozen=True)
class StatsView:
    """A read-only snapshot handed to policies. Arrays are [N], one row per task."""

    alpha: np.ndarray  # posterior successes incl. bucket prior
    beta: np.ndarray  # posterior failures incl. bucket prior
    evidence: np.ndarray  # decayed observation count (without the prior)
    attempts: np.ndarray  # raw number of scored trajectories, never decayed
    last_step: np.ndarray  # scheduler step of the last observation, -1 if never
    group_var: np.ndarray  # EMA of within-group reward variance, nan if never
    domain: np.ndarray  # domain index per task
    bucket: np.ndarray  # difficulty bucket index per task (within its domain)
    n_buckets: int

    @property
    def mean(self) -> np.ndarray:
        return self.alpha / (self.alpha + self.beta)


class PassStats:
    """Mutable per-task counters plus the bucket pooling that builds the prior."""

    def __init__(self, domain_idx: Sequence[int], bucket_idx: Sequence[int], n_buckets: int,
                 decay: float = 0.7, prior_strength: float = 2.0, var_ema: float = 0.5) -> None:
        n = len(domain_idx)
        self.domain = np.asarray(domain_idx, dtype=np.int64)
        self.bucket = np.asarray(bucket_idx, dtype=np.int64)
        self.n_buckets = n_buckets
        self.decay = decay
        self.prior_strength = prior_strength
        self.var_ema = var_ema
        self.succ = np.zeros(n)  # decayed fractional successes
        self.fail = np.zeros(n)  # decayed fractional failures
        self.attempts = np.zeros(n, dtype=np.int64)
        self.last_step = np.full(n, -1, dtype=np.int64)
        self.group_var = np.full(n, np.nan)
        # One pooled key per (domain, bucket) pair: [N] -> key in [0, D * B).
        self._key = self.domain * n_buckets + self.bucket

    def observe(self, i: int, rewards: Sequence[float], step: int) -> None:
        """Fold one group of scored rewards for task `i` into its posterior."""
        if not rewards:
            return
        r = [min(max(float(x), 0.0), 1.0) for x in rewards]  # plain floats: groups are small
        n, s = len(r), sum(r)
        self.succ[i] = self.decay * self.succ[i] + s
        self.fail[i] = self.decay * self.fail[i] + (n - s)
        self.attempts[i] += n
        self.last_step[i] = step
        mean = s / n
        v = sum((x - mean) ** 2 for x in r) / n
        old = self.group_var[i]
        self.group_var[i] = v if np.isnan(old) else self.var_ema * old + (1 - self.var_ema) * v

    def bucket_rates(self) -> np.ndarray:
        """Pooled pass rate per (domain, bucket) key, Beta(1, 1) smoothed: [D * B]."""
        size = int(self._key.max()) + 1 if len(self._key) else 0
        s = np.bincount(self._key, weights=self.succ, minlength=size)
        f = np.bincount(self._key, weights=self.fail, minlength=size)
        return (s + 1.0) / (s + f + 2.0)

    def view(self) -> StatsView:
        m = self.bucket_rates()[self._key]  # [N] prior mean from the task's bucket
        return StatsView(
            alpha=self.prior_strength * m + self.succ,
            beta=self.prior_strength * (1 - m) + self.fail,
            evidence=self.succ + self.fail,
            attempts=self.attempts.copy(),
            last_step=self.last_step.copy(),
            group_var=self.group_var.copy(),
            domain=self.domain,
            bucket=self.bucket,
            n_buckets=self.n_buckets,
        )

    def state_dict(self) -> dict[str, Any]:
        # Floats go through repr-exact JSON (Python floats round-trip exactly).
        return {
            "succ": self.succ.tolist(),
            "fail": self.fail.tolist(),
            "attempts": self.attempts.tolist(),
            "last_step": self.last_step.tolist(),
            "group_var": [None if np.isnan(v) else float(v) for v in self.group_var],
        }

    def load_state_dict(self, d: dict[str, Any]) -> None:
        n = len(self.succ)
        for key in ("succ", "fail", "attempts", "last_step", "group_var"):
            if len(d[key]) != n:
                raise ValueError(f"scheduler state {key!r} has {len(d[key])} rows, tasks have {n}")
        self.succ = np.asarray(d["succ"], dtype=float)
        self.fail = np.asarray(d["fail"], dtype=float)
        self.attempts = np.asarray(d["attempts"], dtype=np.int64)
        self.last_step = np.asarray(d["last_step"], dtype=np.int64)
        self.group_var = np.asarray([np.nan if v is None else v for v in d["group_var"]], dtype=float)
