import asyncio
import random

from tests.unit.schedule.sched_helpers import make_tasks, rollout_groups, traj

from posttrain.schedule import Scheduler, fill_batch, has_signal


def test_equal_rewards_carry_no_signal():
    t = make_tasks(2)[0]
    assert not has_signal([traj(t, 1.0)] * 4)
    assert not has_signal([traj(t, 0.0)] * 4)
    assert has_signal([traj(t, 1.0), traj(t, 0.0)])


def test_infra_errors_do_not_count_as_variance():
    t = make_tasks(2)[0]
    assert not has_signal([traj(t, 1.0), traj(t, 1.0), traj(t, 0.0, infra=True)])


def test_filter_keeps_the_batch_full():
    tasks = make_tasks(200)
    # Two thirds of the tasks always give equal rewards: no gradient there.
    p = {t.id: (0.0, 0.5, 1.0)[int(t.difficulty)] for t in tasks}
    sched = Scheduler(tasks, policy="uniform", seed=0)
    rng = random.Random(0)

    async def rollout(batch):
        return rollout_groups(batch, p, rng, g=8)

    for _ in range(5):
        res = asyncio.run(fill_batch(sched, 16, rollout))
        assert len(res.groups) == 16 and res.short == 0
        assert all(has_signal(g) for g in res.groups)
        assert res.drawn > 16 and res.dropped > 0


def test_over_sampling_follows_the_keep_rate():
    tasks = make_tasks(20)
    sched = Scheduler(tasks, seed=0)
    t = tasks[0]
    sched.filter_groups([[traj(t, 1.0)] * 4] * 3 + [[traj(t, 1.0), traj(t, 0.0)]])  # keep 1 of 4
    assert sched.draw_count(16) > 16
    assert sched.draw_count(16) <= 16 * sched.max_oversample


def test_dropped_fraction_is_reported():
    tasks = make_tasks(20)
    sched = Scheduler(tasks, seed=0)
    t = tasks[0]
    sched.filter_groups([[traj(t, 1.0)] * 4, [traj(t, 1.0), traj(t, 0.0)]])
    assert sched.metrics()["sched/dropped_frac"] == 0.5
