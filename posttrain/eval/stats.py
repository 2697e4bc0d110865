"""Paired statistics for before/after comparisons. Pure functions, checked against SciPy.

    p = mcnemar_exact(b=3, c=11)                       # binary outcomes, paired
    ci = clustered_mean_ci(values, clusters)           # mean with task-clustered 95% CI
    ci = proportion_ci(passed, clusters)               # pass rate: Wilson, clustered
    ci = paired_bootstrap(a, b, clusters, seed=0)      # graded scores, paired, resampling tasks
    adj = holm([0.01, 0.04, 0.03])                     # family-wise error over domains

Clustering: an evaluation draws several epochs of the same task, and those samples are
correlated (an easy task passes every epoch). Treating them as independent shrinks the
standard error by up to sqrt(epochs). Every interval here therefore treats the task as
the unit of resampling / the cluster. Intervals use Student's t with (clusters - 1)
degrees of freedom, which is what a 20-50 task regression set needs; with one sample per
task they reduce to the textbook standard error of the mean.

Not covered: intervals are not Holm-adjusted (only p-values are), and McNemar's test
assumes independent pairs; with several epochs per task its p-value is anti-conservative
to the extent epochs of a task agree with each other. The clustered interval is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb
from typing import Hashable, Sequence

import numpy as np


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from discordant counts.

    b = pairs that passed before and failed after, c = failed before and passed after.
    Under H0 the discordant pairs split Binomial(b + c, 1/2).
    """
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval and its standard error."""

    estimate: float
    low: float
    high: float
    se: float
    n: int  # samples
    clusters: int  # independent units (tasks)

    def as_dict(self) -> dict[str, float | int]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "se": self.se,
                "n": self.n, "clusters": self.clusters}


def _t_quantile(level: float, df: int) -> float:
    from scipy.special import stdtrit  # scipy.stats would cost ~2 s of import time

    return float(stdtrit(df, 0.5 + level / 2))


def clustered_se(values: Sequence[float], clusters: Sequence[Hashable]) -> float:
    """Cluster-robust standard error of the sample mean (CR1 small-sample correction).

    Var(mean) = G/(G-1) * sum_g (sum_{i in g} (x_i - mean))^2 / N^2, with G clusters and
    N samples. With one sample per cluster this equals s / sqrt(N) exactly.
    NaN with fewer than two clusters (no between-task variation can be estimated).
    """
    x = np.asarray(values, dtype=float)  # [N]
    if len(x) != len(clusters):
        raise ValueError(f"{len(x)} values but {len(clusters)} cluster labels")
    _, idx = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    g = int(idx.max()) + 1 if len(x) else 0
    if g < 2:
        return float("nan")
    resid_sums = np.bincount(idx, weights=x - x.mean(), minlength=g)  # [G]
    var = g / (g - 1) * float(np.sum(resid_sums**2)) / len(x) ** 2
    return math.sqrt(var)


def clustered_mean_ci(values: Sequence[float], clusters: Sequence[Hashable], level: float = 0.95) -> Interval:
    """Mean of `values` with a t interval whose standard error is clustered by `clusters`."""
    x = np.asarray(values, dtype=float)
    g = len(set(map(str, clusters)))
    if len(x) == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, nan, 0, 0)
    mean = float(x.mean())
    se = clustered_se(x, clusters)
    if math.isnan(se):
        return Interval(mean, float("nan"), float("nan"), se, len(x), g)
    half = _t_quantile(level, g - 1) * se
    return Interval(mean, mean - half, mean + half, se, len(x), g)


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials; (nan, nan) for n = 0.

    Unlike the normal interval it stays inside [0, 1] and does not shrink to a point at 0/n
    or n/n: 0 of 30 gives [0, 0.114], not [0, 0]. `n` may be an effective (fractional) size.
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / d
    return max(0.0, c - h), min(1.0, c + h)


def proportion_ci(passed: Sequence[float], clusters: Sequence[Hashable], level: float = 0.95) -> Interval:
    """Pass rate of 0/1 outcomes with a Wilson interval at the clustered effective sample size.

    n_eff = p(1 - p) / se^2 with the task-clustered se (Kish's design effect), capped at N:
    with one sample per task it is N (the textbook Wilson interval), and epochs of a task that always agree count
    once. When every sample agrees (se = 0) n_eff is the number of tasks. A t interval would
    report [0, 0] for 0 of 30 passes; this reports [0, 0.114].
    """
    x = np.asarray(passed, dtype=float)  # [N] of 0/1
    g = len(set(map(str, clusters)))
    if len(x) == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, nan, 0, 0)
    p = float(x.mean())
    se = clustered_se(x, clusters) if g >= 2 else float("nan")
    if g == len(x) or not se > 0:  # independent samples: the textbook Wilson interval on g
        n_eff = float(g)
    else:
        n_eff = min(len(x), p * (1 - p) / se**2)
    z = _t_quantile(level, 10**9)  # the normal quantile
    lo, hi = wilson(p * n_eff, n_eff, z)
    return Interval(p, lo, hi, se, len(x), g)


def paired_delta_ci(before: Sequence[float], after: Sequence[float], clusters: Sequence[Hashable],
                    level: float = 0.95) -> Interval:
    """Mean of (after - before) over pairs, clustered by task: for step and token counts."""
    a = np.asarray(before, dtype=float)
    b = np.asarray(after, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    return clustered_mean_ci(b - a, clusters, level)


@dataclass(frozen=True)
class BootstrapResult:
    interval: Interval
    p_value: float  # two-sided, H0: mean paired difference == 0
    resamples: int


def paired_bootstrap(before: Sequence[float], after: Sequence[float], clusters: Sequence[Hashable],
                     resamples: int = 10_000, level: float = 0.95, seed: int = 0) -> BootstrapResult:
    """Cluster (task) bootstrap of the mean paired difference after - before.

    Tasks are drawn with replacement and carry all their epochs with them. The interval is
    the percentile interval; the p-value inverts it: twice the smaller share of resampled
    means on either side of zero (the share at zero split evenly), capped at 1.
    """
    a = np.asarray(before, dtype=float)
    b = np.asarray(after, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    d = b - a  # [N]
    if len(d) == 0:
        nan = float("nan")
        return BootstrapResult(Interval(nan, nan, nan, nan, 0, 0), float("nan"), 0)
    _, idx = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    g = int(idx.max()) + 1
    sums = np.bincount(idx, weights=d, minlength=g)  # [G] per-task sum of differences
    counts = np.bincount(idx, minlength=g).astype(float)  # [G] samples per task
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, g, size=(resamples, g))  # [R, G] task indices
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)  # [R] resampled mean diffs
    alpha = 1 - level
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    below = np.mean(means < 0) + 0.5 * np.mean(means == 0)
    p = min(1.0, 2 * min(below, 1 - below))
    est = float(d.mean())
    return BootstrapResult(Interval(est, float(low), float(high), float(means.std(ddof=1)), len(d), g),
                           float(p), resamples)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone), same order as the input.

    NaN p-values (a domain with no pairs) stay NaN and do not count toward the family size.
    """
    ps = [float(p) for p in p_values]
    order = sorted((i for i, p in enumerate(ps) if not math.isnan(p)), key=lambda i: ps[i])
    m = len(order)
    out = [float("nan")] * len(ps)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def fmt_p(p: float) -> str:
    """A p-value: 4 decimals, or scientific below 1e-3 (4.9e-05, never 0.0000); the viewer's pval (view/static/app.js)."""
    if p is None or math.isnan(p):
        return "nan"
    return f"{p:.4f}" if p >= 1e-3 or p == 0 else f"{p:.1e}"
