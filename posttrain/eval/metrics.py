"""Per-task success metrics over repeated samples (epochs). Pure functions.

    pass_at_k(n=10, c=3, k=5)   # P(at least one of k draws without replacement passes)
    pass_hat_k(n=10, c=3, k=5)  # P(all k draws pass): reliability, tau-bench's pass^k

Both are unbiased estimators computed from n samples with c passes and are NaN when
n < k (no unbiased estimate exists; returning 0 or 1 would mislead an aggregate).
"""

from __future__ import annotations

import math
from math import comb


def _check(n: int, c: int, k: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021): 1 - C(n-c, k) / C(n, k), as a stable running product."""
    _check(n, c, k)
    if n < k:
        return float("nan")
    if n - c < k:
        return 1.0
    # 1 - prod_{i=n-c+1}^{n} (1 - k/i): avoids the huge binomials of large n.
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): unbiased for p^k, the chance that k independent tries all pass."""
    _check(n, c, k)
    if n < k:
        return float("nan")
    return comb(c, k) / comb(n, k)


def nanmean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else float("nan")
