"""Weights move the right way on synthetic statistics."""

import numpy as np
import pytest
from tests.unit.schedule.sched_helpers import make_tasks

from posttrain.registry import registry
from posttrain.schedule import Scheduler
from posttrain.schedule.policies import expected_signal
from posttrain.schedule.stats import PassStats


def _stats(n: int = 4) -> PassStats:
    # One domain, one bucket: the bucket prior is shared, as in a real run.
    return PassStats([0] * n, [0] * n, 1)


def _observe(stats: PassStats, i: int, rewards: list[float], times: int) -> None:
    for step in range(times):
        stats.observe(i, rewards, step)


def test_learning_signal_moves_weights_the_right_way():
    stats = _stats()
    fn = registry("sched_policy").get("learning_signal")
    before = fn(stats.view(), 0)
    _observe(stats, 0, [1.0] * 8, 4)  # always solved
    _observe(stats, 1, [0.0] * 8, 4)  # never solved
    _observe(stats, 2, [1.0] * 4 + [0.0] * 4, 4)  # mid-range
    after = fn(stats.view(), 4)
    assert after[0] < before[0]
    assert after[1] < before[1]
    assert after[2] > before[2]
    assert after[2] > after[3] > after[1] > after[0]  # unseen task sits between


def test_learning_signal_keeps_an_exploration_floor_for_hopeless_tasks():
    stats = _stats()
    _observe(stats, 1, [0.0] * 8, 10)
    w = registry("sched_policy").get("learning_signal")(stats.view(), 10, floor=0.05)
    assert w[1] >= 0.05


def test_solved_tasks_retire_then_come_back_for_a_revisit():
    stats = _stats()
    _observe(stats, 0, [1.0] * 8, 3)  # last observed at step 2
    fn = registry("sched_policy").get("learning_signal")
    assert fn(stats.view(), 3, revisit_every=10)[0] == 0.0
    assert fn(stats.view(), 12, revisit_every=10)[0] > 0.0


def test_difficulty_pools_give_each_pool_its_share():
    stats = _stats(10)
    for i in range(2):
        _observe(stats, i, [1.0] * 8, 2)  # easy pool: 2 tasks
    for i in range(2, 5):
        _observe(stats, i, [0.0] * 8, 2)  # hard pool: 3 tasks
    w = registry("sched_policy").get("difficulty_pools")(stats.view(), 2, easy_share=0.1, hard_share=0.2)
    w = w / w.sum()
    assert w[:2].sum() == pytest.approx(0.1)
    assert w[2:5].sum() == pytest.approx(0.2)
    assert w[5:].sum() == pytest.approx(0.7)


def test_expected_signal_peaks_at_even_odds():
    a = np.array([50.0, 10.0, 90.0])
    b = np.array([50.0, 90.0, 10.0])
    s = expected_signal(a, b)
    assert s[0] > s[1] and s[1] == pytest.approx(s[2])


def test_adaptive_scheduler_draws_mid_range_tasks_more_often():
    tasks = make_tasks(60, ("a",), levels=3)
    p = {t.id: (0.0, 0.5, 1.0)[int(t.difficulty)] for t in tasks}
    sched = Scheduler(tasks, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        batch = sched.next_batch(6)
        sched.observe([[_t(t, float(rng.random() < p[t.id])) for _ in range(8)] for t in batch])
    drawn = [p[t.id] for _ in range(10) for t in sched.next_batch(6)]
    assert drawn.count(0.5) / len(drawn) > 0.6  # uniform would give 1/3


def _t(task, r):
    from tests.unit.schedule.sched_helpers import traj

    return traj(task, r)
