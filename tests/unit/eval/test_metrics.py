"""pass@k and pass^k against brute-force enumeration and the binomial formula."""

from __future__ import annotations

import itertools
import math

import pytest
from scipy.special import comb

from posttrain.eval.metrics import pass_at_k, pass_hat_k


def _enumerate(n: int, c: int, k: int, all_pass: bool) -> float:
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    hit = [all(s) if all_pass else any(s) for s in subsets]
    return sum(hit) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (6, 5, 2), (7, 3, 7), (4, 4, 2)])
def test_pass_at_k_equals_enumeration(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(_enumerate(n, c, k, all_pass=False))


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 2), (6, 5, 3), (4, 4, 4)])
def test_pass_hat_k_equals_enumeration(n, c, k):
    assert pass_hat_k(n, c, k) == pytest.approx(_enumerate(n, c, k, all_pass=True))


def test_pass_at_k_matches_scipy_binomials_for_large_n():
    n, c, k = 200, 13, 10
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k, exact=True) / comb(n, k, exact=True))


def test_pass_at_1_is_pass_rate():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_nan_when_fewer_samples_than_k():
    assert math.isnan(pass_at_k(3, 1, 5)) and math.isnan(pass_hat_k(3, 3, 5))


def test_rejects_more_passes_than_samples():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
