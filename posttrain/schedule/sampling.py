"""Seeded stratified draws: split a count across strata, then pick items within one.

Everything takes an explicit `numpy.random.Generator` (the scheduler seeds one per draw
from `[seed, draw_index]`), so a draw is a function of the seed and the history, and
nothing depends on a global generator or on dict order.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def allocate(n: int, weights: Sequence[float], rng: np.random.Generator) -> list[int]:
    """Split `n` draws across strata with E[count_i] = n * w_i / sum(w), minimal variance.

    Each stratum gets floor(n * share); the leftover draws go to strata picked without
    replacement with probability proportional to their fractional parts (they sum to
    the leftover, so the expectation is exact). This is what makes sampling *stratified*:
    a 70/30 mixture with n = 10 gives exactly 7 and 3, never 10 and 0.
    """
    w = np.asarray(weights, dtype=float)
    total = float(w.sum())
    if n <= 0 or total <= 0:
        return [0] * len(w)
    exact = n * w / total  # [S]
    counts = np.floor(exact).astype(np.int64)
    left = n - int(counts.sum())
    for i in weighted_without_replacement(exact - counts, left, rng):
        counts[i] += 1
    return counts.tolist()


def weighted_without_replacement(weights: Sequence[float] | np.ndarray, k: int,
                                 rng: np.random.Generator) -> list[int]:
    """`k` distinct indices with probability proportional to weight (Efraimidis-Spirakis).

    Key log(u) / w per item, take the k largest. Items of weight 0 are never picked, so
    fewer than `k` come back if fewer are positive.
    """
    w = np.asarray(weights, dtype=float)
    u = rng.random(len(w))  # [M], drawn for every item so the stream does not depend on w
    if k <= 0:
        return []
    pos = np.flatnonzero(w > 0)
    keys = np.log(np.maximum(u[pos], 1e-300)) / w[pos]
    order = np.argsort(-keys, kind="stable")[:k]
    return pos[order].tolist()


def pick(weights: Sequence[float] | np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """`k` indices: distinct while positive-weight items last, then with replacement.

    A stratum asked for more prompts than it has live tasks repeats its best ones rather
    than leaving the batch short; an all-zero stratum falls back to uniform.
    """
    w = np.asarray(weights, dtype=float)
    if k <= 0 or len(w) == 0:
        return []
    if not (w > 0).any():
        w = np.ones(len(w))
    out = weighted_without_replacement(w, k, rng)
    if len(out) < k:
        extra = rng.choice(len(w), size=k - len(out), p=w / w.sum())
        out += extra.tolist()
    return out
