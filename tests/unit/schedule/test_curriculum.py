"""The per-domain difficulty curriculum (schedule/curriculum.py) inside the Scheduler, on a simulated model
whose pass probability falls with difficulty: no model, no sandbox."""

from __future__ import annotations

import math
import random

import pytest

from posttrain.errors import ConfigError
from posttrain.schedule import Scheduler
from posttrain.types import Message, Spec, Task
from tests.unit.schedule.sched_helpers import group

LEVELS = (1.0, 2.0, 3.0, 4.0, 5.0)
ARGS = {"band": [0.2, 0.8], "window": 32, "min_evidence": 16, "cooldown": 2}


def pool(domains=("easy", "hard"), per_level: int = 12) -> list[Task]:
    return [Task(id=f"{d}-{lv:g}-{i}", domain=d, prompt=(Message("user", f"{d} {lv} {i}"),), verifier=Spec("exact_numeric"),
                 difficulty=lv) for d in domains for lv in LEVELS for i in range(per_level)]


def pass_prob(skill: float, difficulty: float) -> float:
    """The simulated model: a logistic in (skill - difficulty), 0.5 at difficulty == skill."""
    return 1.0 / (1.0 + math.exp(-2.5 * (skill - difficulty)))


def run(sched: Scheduler, skill, steps: int, rng: random.Random, batch: int = 8, g: int = 8) -> list[dict]:
    """`steps` RL steps of the simulated model; skill(domain, step) -> its skill. The metrics rows."""
    rows = []
    for s in range(steps):
        tasks = sched.next_batch(batch)
        sched.observe([group(t, [float(rng.random() < pass_prob(skill(t.domain, s), t.difficulty)) for _ in range(g)])
                       for t in tasks])
        rows.append(sched.metrics())
    return rows


def in_band(skill: float, level: float) -> bool:
    return 0.2 <= pass_prob(skill, level) <= 0.8


def test_level_converges_into_the_band_per_domain():
    skills = {"easy": 4.0, "hard": 2.0}  # p = 0.5 at level 4 and 2; the levels beside them are out of the band
    sched = Scheduler(pool(), policy="uniform", seed=0, curriculum=ARGS)
    rows = run(sched, lambda d, s: skills[d], 120, random.Random(0))
    for d, skill in skills.items():
        late = [r[f"sched/difficulty/{d}"] for r in rows[60:]]
        assert all(in_band(skill, lv) for lv in late), (d, late)


def test_draws_come_only_from_each_domains_current_level():
    sched = Scheduler(pool(), policy="uniform", seed=1, curriculum=ARGS)
    run(sched, lambda d, s: 3.0, 30, random.Random(1))
    levels = sched.curriculum.level
    batch = sched.next_batch(16)
    assert batch and all(t.difficulty == levels[t.domain] for t in batch)


def test_a_hopeless_start_moves_down():
    sched = Scheduler(pool(("d",)), policy="uniform", seed=2, curriculum={**ARGS, "start": 5.0})
    assert sched.curriculum.level["d"] == 5.0
    rows = run(sched, lambda d, s: 1.5, 60, random.Random(2))
    assert rows[-1]["sched/difficulty/d"] <= 2.0


def test_a_learning_model_is_moved_up():
    sched = Scheduler(pool(("d",)), policy="uniform", seed=3, curriculum=ARGS)
    rows = run(sched, lambda d, s: 1.0 + s / 40, 160, random.Random(3))  # skill 1 -> 5
    assert rows[10]["sched/difficulty/d"] <= 2.0 and rows[-1]["sched/difficulty/d"] >= 4.0


def test_a_pass_rate_inside_the_band_never_moves():
    sched = Scheduler(pool(("d",)), policy="uniform", seed=4, curriculum={**ARGS, "start": 3.0})
    rows = run(sched, lambda d, s: 3.0, 80, random.Random(4))  # p = 0.5 at level 3
    assert {r["sched/difficulty/d"] for r in rows} == {3.0}


def test_no_move_before_min_evidence_at_the_new_level():
    sched = Scheduler(pool(("d",)), policy="uniform", seed=5, curriculum={**ARGS, "min_evidence": 32, "window": 32})
    run(sched, lambda d, s: 9.0, 20, random.Random(5), batch=1)  # always passes; 8 rewards a step
    steps = [m[0] for m in sched.curriculum.moves]
    assert len(steps) == 4  # levels 1 -> 5
    assert steps[0] == 3 and all(b - a == 4 for a, b in zip(steps, steps[1:]))  # 32 rewards at each level first


def test_save_and_load_mid_run_gives_identical_later_draws():
    skill = lambda d, s: 2.5 + s / 30  # noqa: E731
    a = Scheduler(pool(), policy="learning_signal", seed=7, curriculum=ARGS)
    run(a, skill, 25, random.Random(7))
    state = a.state_dict()
    b = Scheduler(pool(), policy="learning_signal", seed=7, curriculum=ARGS)
    b.load_state_dict(state)
    ra, rb = random.Random(99), random.Random(99)
    for s in range(25, 60):
        ta, tb = a.next_batch(8), b.next_batch(8)
        assert [t.id for t in ta] == [t.id for t in tb]
        for sched, rng, ts in ((a, ra, ta), (b, rb, tb)):
            sched.observe([group(t, [float(rng.random() < pass_prob(skill(t.domain, s), t.difficulty)) for _ in range(8)])
                           for t in ts])
    assert a.curriculum.level == b.curriculum.level and a.curriculum.moves == b.curriculum.moves


def test_state_from_a_run_without_a_curriculum_is_refused():
    plain = Scheduler(pool(), policy="uniform", seed=0)
    with pytest.raises(ConfigError, match="curriculum"):
        Scheduler(pool(), policy="uniform", seed=0, curriculum=ARGS).load_state_dict(plain.state_dict())


@pytest.mark.parametrize("bad, match", [
    ({"band": [0.8, 0.2]}, r"band=\[0.8, 0.2\] is empty"),
    ({"band": [0.5, 0.5]}, "is empty"),
    ({"band": [0.2]}, "two pass rates"),
    ({"min_evidence": 40, "window": 32}, "min_evidence <= window"),
    ({"cooldown": -1}, "cooldown"),
    ({"domains": ["nope"]}, "'nope'"),
    ({"exclude": ["nope"]}, "'nope'"),
])
def test_bad_curriculum_arguments_are_one_line_errors(bad, match):
    with pytest.raises(ConfigError, match=match) as e:
        Scheduler(pool(), policy="uniform", seed=0, curriculum={**ARGS, **bad})
    assert "\n" not in str(e.value)


def test_a_domain_outside_the_curriculum_draws_every_level():
    sched = Scheduler(pool(), policy="uniform", seed=8, curriculum={**ARGS, "domains": ["easy"]})
    seen = {t.difficulty for _ in range(20) for t in sched.next_batch(10) if t.domain == "hard"}
    assert len(seen) > 1 and "sched/difficulty/hard" not in sched.metrics()


def test_an_excluded_domain_keeps_drawing_every_level_it_has():
    sched = Scheduler(pool(), policy="uniform", seed=9, curriculum={**ARGS, "exclude": ["hard"]})
    assert set(sched.curriculum.level) == {"easy"}


def test_the_row_of_a_move_carries_the_pass_rate_that_moved_it():
    args = {**ARGS, "window": 8, "min_evidence": 8, "start": 5.0}
    sched = Scheduler(pool(("hard",)), policy="uniform", seed=0, curriculum=args)
    rows = run(sched, lambda d, s: -10.0, 1, random.Random(0), batch=1, g=8)  # hopeless: every reward 0
    assert rows[0]["sched/difficulty/hard"] == 4.0 and rows[0]["sched/level_pass/hard"] == 0.0


def test_a_resumed_curriculum_reports_the_same_metrics():
    args = {**ARGS, "window": 8, "min_evidence": 8, "start": 5.0}
    a = Scheduler(pool(("hard",)), policy="uniform", seed=0, curriculum=args)
    run(a, lambda d, s: -10.0, 1, random.Random(0), batch=1, g=8)
    b = Scheduler(pool(("hard",)), policy="uniform", seed=0, curriculum=args)
    b.load_state_dict(a.state_dict())
    assert b.metrics() == a.metrics()
