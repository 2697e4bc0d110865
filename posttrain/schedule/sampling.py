"""Seeded stratified draws: split a count across strata, then pick items within one.

Everything takes an explicit `random.Random`, so a draw is a function of the seed and
the history, and nothing depends on numpy's global generator or on dict order.
"""

from __future__ import annotations

import math
import random
from typing import Sequence


def allocate(n: int, weights: Sequence[float], rng: random.Random) -> list[int]:
    """Split `n` draws across strata with E[count_i] = n * w_i / sum(w), minimal variance.

    Each stratum gets floor(n * share); the leftover draws go to strata picked without
    replacement with probability proportional to their fractional parts (they sum to
    the leftover, so the expectation is exact). This is what makes sampling *stratified*:
    a 70/30 mixture with n = 10 gives exactly 7 and 3, never 10 and 0.
    """
    total = float(sum(weights))
    if n <= 0 or total <= 0:
        return [0] * len(weights)
    exact = [n * w / total for w in weights]
    counts = [int(math.floor(e)) for e in exact]
    frac = [e - c for e, c in zip(exact, counts)]
    left = n - sum(counts)
    for i in weighted_without_replacement(frac, left, rng):
        counts[i] += 1
    return counts


def weighted_without_replacement(weights: Sequence[float], k: int, rng: random.Random) -> list[int]:
    """`k` distinct indices with probability proportional to weight (Efraimidis-Spirakis).

    Key u^(1/w) per item, take the k largest; log form for numerical safety. Items of
    weight 0 are never picked, so fewer than `k` come back if fewer are positive.
    """
    keys = []
    for i, w in enumerate(weights):
        u = rng.random()
        if w > 0:
            keys.append((math.log(u if u > 0 else 1e-300) / w, i))
    keys.sort(reverse=True)
    return [i for _, i in keys[:k]]


def pick(weights: Sequence[float], k: int, rng: random.Random) -> list[int]:
    """`k` indices: distinct while positive-weight items last, then with replacement.

    A domain asked for more prompts than it has live tasks repeats its best ones rather
    than leaving the batch short; an all-zero stratum falls back to uniform.
    """
    if k <= 0 or not weights:
        return []
    if not any(w > 0 for w in weights):
        weights = [1.0] * len(weights)
    out = weighted_without_replacement(weights, k, rng)
    while len(out) < k:
        out.append(rng.choices(range(len(weights)), weights=weights)[0])
    return out
