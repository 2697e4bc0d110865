import json
import random
from collections import Counter

import pytest
from tests.unit.schedule.sched_helpers import make_tasks, rollout_groups

from posttrain.errors import ConfigError
from posttrain.schedule import Scheduler


def _run(sched: Scheduler, steps: int, p: dict[str, float], seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        batch = sched.next_batch(8)
        out.append([t.id for t in batch])
        groups = rollout_groups(batch, p, rng)
        sched.observe(groups)
        sched.filter_groups(groups)
    return out


def _probs(tasks):
    return {t.id: (0.1, 0.5, 0.95)[int(t.difficulty)] for t in tasks}


@pytest.mark.parametrize("policy", ["uniform", "learning_signal", "difficulty_pools"])
def test_same_seed_and_history_give_same_batches(policy):
    tasks = make_tasks()
    a = _run(Scheduler(tasks, {"arith": 1, "code": 1}, policy=policy, seed=3), 6, _probs(tasks))
    b = _run(Scheduler(tasks, {"arith": 1, "code": 1}, policy=policy, seed=3), 6, _probs(tasks))
    c = _run(Scheduler(tasks, {"arith": 1, "code": 1}, policy=policy, seed=4), 6, _probs(tasks))
    assert a == b
    assert a != c


def test_state_dict_round_trip_resumes_identically():
    tasks = make_tasks()
    p = _probs(tasks)
    whole = Scheduler(tasks, {"arith": 2, "code": 1}, seed=1)
    first = _run(whole, 5, p, seed=9)
    rest = _run(whole, 5, p, seed=10)
    part = Scheduler(tasks, {"arith": 2, "code": 1}, seed=1)
    assert _run(part, 5, p, seed=9) == first
    saved = json.loads(json.dumps(part.state_dict()))  # must survive JSON
    resumed = Scheduler(tasks, {"arith": 2, "code": 1}, seed=1)
    resumed.load_state_dict(saved)
    assert _run(resumed, 5, p, seed=10) == rest
    assert resumed.state_dict() == whole.state_dict()


def test_state_for_other_tasks_is_refused():
    sched = Scheduler(make_tasks(60), seed=0)
    other = Scheduler(make_tasks(62), seed=0)
    with pytest.raises(ConfigError, match="different task set"):
        other.load_state_dict(sched.state_dict())


def test_domains_get_exactly_their_mixture_share():
    sched = Scheduler(make_tasks(90, ("a", "b", "c")), {"a": 0.5, "b": 0.3, "c": 0.2}, seed=0)
    counts = Counter(t.domain for t in sched.next_batch(10))
    assert counts == {"a": 5, "b": 3, "c": 2}


def test_no_duplicate_task_until_observed():
    tasks = make_tasks(40)
    sched = Scheduler(tasks, seed=0, policy="uniform")
    first = {t.id for t in sched.next_batch(10)}
    second = {t.id for t in sched.next_batch(10)}
    assert len(first) == 10 and len(second) == 10
    assert not first & second


def test_infra_errors_and_timeouts_are_not_evidence():
    from tests.unit.schedule.sched_helpers import traj

    tasks = make_tasks(10)
    sched = Scheduler(tasks, seed=0)
    t = tasks[0]
    sched.observe([[traj(t, 0.0, infra=True), traj(t, 0.0, finish="timeout")]])
    assert sched.stats.attempts[0] == 0
    sched.observe([[traj(t, 1.0), traj(t, 0.0)]])
    assert sched.stats.attempts[0] == 2


@pytest.mark.parametrize("mixture, match", [
    ({"arith": 1, "nope": 1}, "nope"),
    ({"arith": 1}, "code"),
    ({"arith": -1, "code": 1}, "arith"),
])
def test_bad_mixture_names_the_domain(mixture, match):
    with pytest.raises(ConfigError, match=match):
        Scheduler(make_tasks(), mixture)


def test_bad_policy_names_and_args_are_config_errors():
    with pytest.raises(ConfigError, match="unknown sched_policy 'nope'"):
        Scheduler(make_tasks(), policy="nope")
    with pytest.raises(ConfigError, match="learning_signal"):
        Scheduler(make_tasks(), policy="learning_signal", flor=0.1)
    with pytest.raises(ConfigError, match="floor"):
        Scheduler(make_tasks(), policy="learning_signal", floor=2.0)


def test_metrics_report_weights_pass_rates_and_drops():
    tasks = make_tasks()
    sched = Scheduler(tasks, {"arith": 3, "code": 1}, seed=0)
    _run(sched, 3, _probs(tasks))
    m = sched.metrics()
    assert m["sched/weight/arith"] == pytest.approx(0.75)
    assert sum(v for k, v in m.items() if k.startswith("sched/weight/arith/")) == pytest.approx(0.75)
    assert 0.0 <= m["sched/pass_rate/code"] <= 1.0
    assert 0.0 < m["sched/dropped_frac"] < 1.0
    assert sched.metrics()["sched/dropped_frac"] == 0.0  # window restarts after each call


def test_asking_for_more_than_there_are_tasks_still_fills_the_batch():
    sched = Scheduler(make_tasks(6), seed=0)
    batch = sched.next_batch(20)
    assert len(batch) == 20 and len({t.id for t in batch}) == 6


def test_a_flat_trajectory_list_is_grouped_by_task():
    from tests.unit.schedule.sched_helpers import traj

    tasks = make_tasks(10)
    sched = Scheduler(tasks, seed=0)
    sched.observe([traj(tasks[0], 1.0), traj(tasks[1], 0.0), traj(tasks[0], 0.0)])
    assert sched.stats.attempts[:2].tolist() == [2, 1]
    assert sched.stats.group_var[0] == 0.25
