"""schedule.domain_shares: signal moves draws toward the domains whose groups carry reward variance (issue 39)."""

import json
import random
from collections import Counter

import numpy as np
import pytest
from tests.unit.schedule.sched_helpers import make_tasks, rollout_groups

from posttrain.errors import ConfigError
from posttrain.schedule import Scheduler
from posttrain.schedule.curriculum import Curriculum
from posttrain.schedule.domain_shares import DECAY, PRIOR, SignalShares

DOMAINS = ("edge", "dead", "done")
P = {"edge": 0.4, "dead": 0.0, "done": 1.0}  # pass rate per domain: only "edge" gives mixed groups


def _run(sched: Scheduler, steps: int, seed: int = 0, n: int = 9) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        batch = sched.next_batch(n)
        out.append([t.id for t in batch])
        groups = rollout_groups(batch, {t.id: P[t.domain] for t in sched.tasks}, rng, g=8)
        sched.observe(groups)
        sched.filter_groups(groups)
    return out


def _late_counts(mode: str) -> Counter:
    sched = Scheduler(make_tasks(90, DOMAINS, levels=1), policy="learning_signal", seed=0, domain_shares=mode)
    drawn = _run(sched, 30)
    return Counter(tid.split("-")[0] for ids in drawn[15:] for tid in ids)


def test_signal_shares_give_the_draws_to_the_domain_with_mixed_groups():
    counts = _late_counts("signal")
    assert counts["edge"] > 0.75 * sum(counts.values())


def test_mixture_shares_stay_fixed_whatever_the_groups_say():
    counts = _late_counts("mixture")
    assert counts == {"edge": 45, "dead": 45, "done": 45}  # 15 steps x 9 prompts, a third each


def test_a_hopeless_or_solved_domain_is_tried_before_it_is_left():
    sched = Scheduler(make_tasks(90, DOMAINS, levels=1), policy="learning_signal", seed=0, domain_shares="signal")
    counts = Counter(tid.split("-")[0] for ids in _run(sched, 30) for tid in ids)
    assert counts["dead"] >= 2 and counts["done"] >= 2


def test_a_domain_that_starts_to_learn_regains_its_rate():
    shares = SignalShares(2)
    for _ in range(30):
        shares.observe(0, True), shares.observe(1, False)
    low = shares.rates()[1]
    for _ in range(10):
        shares.observe(1, True)
    assert low < 0.05 and shares.rates()[1] > 0.6


def test_the_floor_of_a_dead_domain_is_the_decayed_prior():
    shares = SignalShares(1)
    for _ in range(500):
        shares.observe(0, False)
    assert shares.rates()[0] == pytest.approx(PRIOR / (2 * PRIOR + 1 / (1 - DECAY)), rel=1e-6)


def test_unseen_domains_share_the_slots_by_their_mixture_weight():
    shares = SignalShares(2)
    p = shares.win_probability([1.0, 1.0])
    assert sum(p) == pytest.approx(1.0) and abs(p[0] - p[1]) < 0.15  # 512 MC draws: sd of the gap 0.044
    assert shares.win_probability([1.0, 0.0]) == [1.0, 0.0]  # weight 0: never drawn


def test_a_draw_hands_out_exactly_n_slots():
    shares = SignalShares(5)
    counts = shares.allocate(13, [1.0] * 5, np.random.default_rng(0))
    assert sum(counts) == 13 and len(counts) == 5


def test_the_metrics_report_the_signal_domain_ahead():
    sched = Scheduler(make_tasks(90, DOMAINS, levels=1), policy="learning_signal", seed=0, domain_shares="signal")
    _run(sched, 20)
    w = sched.metrics()
    assert w["sched/weight/edge"] > 0.75 and sum(w[f"sched/weight/{d}"] for d in DOMAINS) == pytest.approx(1.0)


def test_resume_draws_the_same_batches():
    tasks = make_tasks(90, DOMAINS, levels=1)
    whole = Scheduler(tasks, policy="learning_signal", seed=2, domain_shares="signal")
    _run(whole, 6, seed=1)
    rest = _run(whole, 6, seed=5)
    part = Scheduler(tasks, policy="learning_signal", seed=2, domain_shares="signal")
    _run(part, 6, seed=1)
    resumed = Scheduler(tasks, policy="learning_signal", seed=2, domain_shares="signal")
    resumed.load_state_dict(json.loads(json.dumps(part.state_dict())))
    assert _run(resumed, 6, seed=5) == rest


def test_a_state_saved_without_signal_shares_is_refused():
    tasks = make_tasks(30, DOMAINS, levels=1)
    saved = Scheduler(tasks, seed=0).state_dict()
    with pytest.raises(ConfigError, match="domain_shares"):
        Scheduler(tasks, seed=0, domain_shares="signal").load_state_dict(saved)


def test_an_unknown_mode_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="'adaptive'"):
        Scheduler(make_tasks(30, DOMAINS, levels=1), domain_shares="adaptive")


def test_a_curriculum_move_resets_the_domains_signal_count():
    tasks = make_tasks(60, ("edge", "done"), levels=2)
    sched = Scheduler(tasks, policy="learning_signal", seed=0, domain_shares="signal",
                      curriculum={"band": (0.2, 0.8), "window": 8, "min_evidence": 8})
    done = sched.domains.index("done")
    _run(sched, 1, n=4)  # "done" passes everything at level 0: it moves up
    assert isinstance(sched.curriculum, Curriculum) and sched.curriculum.level["done"] == 1.0
    assert sched.signal_shares.rates()[done] == pytest.approx(0.5)
