"""Statistics checked against SciPy and hand-computed small cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from posttrain.eval.stats import (
    proportion_ci,
    wilson,
    clustered_mean_ci,
    clustered_se,
    holm,
    mcnemar_exact,
    paired_bootstrap,
    paired_delta_ci,
)


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (3, 11), (7, 7), (0, 9), (25, 40)])
def test_mcnemar_matches_scipy_binomtest(b, c):
    expected = 1.0 if b + c == 0 else sps.binomtest(min(b, c), b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_hand_case():
    # b=0, c=5: two-sided 2 * (1/2)^5 = 0.0625
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625)


def test_clustered_se_hand_case():
    # mean 0.5; residual sums per task: a=+1, b=-1, c=0 -> 3/2 * 2 / 36 = 1/12
    se = clustered_se([1, 1, 0, 0, 1, 0], ["a", "a", "b", "b", "c", "c"])
    assert se == pytest.approx(math.sqrt(1 / 12))


def test_clustered_se_one_sample_per_cluster_is_textbook_sem():
    x = np.random.default_rng(1).normal(size=17)
    assert clustered_se(x, range(17)) == pytest.approx(sps.sem(x))


def test_clustered_ci_equal_clusters_matches_t_interval_of_task_means():
    rng = np.random.default_rng(2)
    task_p = rng.uniform(size=12)
    x = (rng.uniform(size=(12, 5)) < task_p[:, None]).astype(float)  # [tasks, epochs]
    clusters = np.repeat(np.arange(12), 5)
    ci = clustered_mean_ci(x.ravel(), clusters)
    means = x.mean(axis=1)
    low, high = sps.t.interval(0.95, 11, loc=means.mean(), scale=sps.sem(means))
    assert (ci.low, ci.high) == pytest.approx((low, high))
    assert ci.clusters == 12 and ci.n == 60


def test_clustered_se_is_nan_with_one_cluster():
    assert math.isnan(clustered_mean_ci([1, 0, 1], ["t", "t", "t"]).low)


def test_paired_delta_ci_is_interval_of_differences():
    before, after = [3, 4, 5, 6], [2, 4, 4, 4]
    ci = paired_delta_ci(before, after, ["a", "b", "c", "d"])
    assert ci.estimate == pytest.approx(-1.0)
    low, high = sps.t.interval(0.95, 3, loc=-1.0, scale=sps.sem([-1, 0, -1, -2]))
    assert (ci.low, ci.high) == pytest.approx((low, high))


def test_paired_bootstrap_agrees_with_scipy_bootstrap():
    rng = np.random.default_rng(3)
    a = rng.uniform(size=40)
    b = np.clip(a + 0.1 + rng.normal(scale=0.1, size=40), 0, 1)
    res = paired_bootstrap(a, b, range(40), resamples=20_000, seed=0)
    ref = sps.bootstrap((b - a,), np.mean, n_resamples=20_000, method="percentile", random_state=0)
    assert res.interval.low == pytest.approx(ref.confidence_interval.low, abs=0.005)
    assert res.interval.high == pytest.approx(ref.confidence_interval.high, abs=0.005)
    assert res.p_value < 0.001


def test_paired_bootstrap_no_difference_has_p_one():
    a = [0.2, 0.5, 0.9, 0.1]
    res = paired_bootstrap(a, a, range(4), resamples=500)
    assert res.p_value == 1.0 and res.interval.low == res.interval.high == 0.0


def test_paired_bootstrap_is_seeded():
    a, b = [0.1, 0.4, 0.3, 0.8, 0.5], [0.2, 0.3, 0.6, 0.9, 0.4]
    r1 = paired_bootstrap(a, b, range(5), resamples=300, seed=7)
    r2 = paired_bootstrap(a, b, range(5), resamples=300, seed=7)
    assert r1 == r2


def test_holm_hand_case():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01=0.03, 2*0.03=0.06, max(0.06, 1*0.04)=0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_holm_keeps_nan_out_of_family():
    out = holm([0.02, float("nan"), 0.5])
    assert out[0] == pytest.approx(0.04) and math.isnan(out[1]) and out[2] == pytest.approx(0.5)


def test_wilson_matches_statsmodels_textbook_values():
    lo, hi = wilson(8, 10)  # Wilson 95% for 8/10: [0.490, 0.943]
    assert (round(lo, 3), round(hi, 3)) == (0.490, 0.943)


def test_a_pass_rate_of_zero_has_an_interval_wider_than_a_point():
    ci = proportion_ci([0.0] * 30, range(30))  # a t interval would be [0, 0]
    assert ci.low == 0.0 and round(ci.high, 3) == 0.114


def test_a_pass_rate_with_one_sample_per_task_is_the_textbook_wilson_interval():
    ci = proportion_ci([1.0] * 8 + [0.0] * 2, range(10))
    assert (ci.low, ci.high) == pytest.approx(wilson(8, 10), abs=1e-4)


def test_epochs_of_a_task_that_always_agree_count_once():
    tasks = [i // 3 for i in range(30)]  # 10 tasks x 3 epochs, every epoch of a task agreeing
    ci = proportion_ci([float(t % 2) for t in tasks], tasks)
    # 10 tasks' worth of evidence (CR1's G/(G-1) makes it 9), not 30 samples'
    assert (ci.low, ci.high) == pytest.approx(wilson(4.5, 9), abs=1e-3)
    assert ci.high - ci.low > (lambda lo, hi: hi - lo)(*wilson(15, 30))
