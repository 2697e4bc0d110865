"""A curriculum (`schedule.curriculum`) on built-in domains numbered by (seed, index): make_splits pools
each followed domain at every level, and each pooled task's id carries its level, so the pools, the
held-out split and the scheduler's index stay unique. A single-level domain keeps the ids it always had
(pinned suites and regression sets name them)."""

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config, check_rl_splits
from posttrain.errors import ConfigError
from posttrain.registry import build
from posttrain.tasks.base import generate_split
from posttrain.tasks.splits import make_splits

# domain -> curriculum levels it tells apart (arithmetic: any float; math: integer levels 0..3)
CASES = {"arithmetic": [0.0, 1.0, 2.0], "math": [0.0, 1.0, 2.0, 3.0]}


def _cfg(domain, levels, *more):
    return load_config(None, ["seed=0", f"tasks.domains={{{domain}: {{n_train: 24, n_eval: 8}}}}",
                              f"schedule.curriculum={{levels: {levels}}}", *more])


@pytest.mark.parametrize("domain", CASES)
def test_a_curriculum_on_a_built_in_domain_passes_the_config_check_and_builds_its_splits(domain):
    cfg = _cfg(domain, CASES[domain])
    check_config(cfg, needs=("tasks",))
    splits = make_splits(cfg)
    check_rl_splits(cfg, splits)
    assert len(splits.train) == 24


@pytest.mark.parametrize("domain", CASES)
def test_each_level_pools_its_own_task_ids(domain):
    train = make_splits(_cfg(domain, CASES[domain])).train
    by_level = {lv: {t.id for t in train if t.difficulty == lv} for lv in CASES[domain]}
    assert all(by_level.values())  # every level has tasks
    assert sum(len(ids) for ids in by_level.values()) == len({t.id for t in train}) == len(train)


@pytest.mark.parametrize("domain", CASES)
def test_train_and_held_out_share_no_task_id_and_no_prompt(domain):
    sp = make_splits(_cfg(domain, CASES[domain]))
    assert not {t.id for t in sp.train} & {t.id for t in sp.held_out}
    assert not {t.prompt[-1].content for t in sp.train} & {t.prompt[-1].content for t in sp.held_out}


def test_a_pooled_task_id_names_its_level():
    train = make_splits(_cfg("arithmetic", [0.0, 1.5])).train
    assert {t.id.rsplit("@", 1)[1] for t in train} == {"L0", "L1.5"}
    assert all(t.id.endswith(f"@L{t.difficulty:g}") for t in train)


def test_a_run_without_a_curriculum_keeps_the_domains_own_ids():
    cfg = load_config(None, ["seed=0", "tasks.domains={arithmetic: {n_train: 24, n_eval: 8}}"])
    sp = make_splits(cfg)
    dom = build("arithmetic", kind="domain")
    held = generate_split(dom, 8, cfg.tasks.eval_seed, 1.0)
    assert [t.id for t in sp.held_out] == [t.id for t in held]
    assert [t.id for t in sp.train] == [f"arithmetic-0-{i}" for i in range(24)]


def test_the_held_out_split_keeps_its_ids_under_a_curriculum():
    with_cur = make_splits(_cfg("arithmetic", [0.0, 1.0, 2.0])).held_out
    without = make_splits(load_config(None, ["seed=0", "tasks.domains={arithmetic: {n_train: 24, n_eval: 8}}"])).held_out
    assert [t.id for t in with_cur] == [t.id for t in without]


def test_a_domain_the_curriculum_excludes_keeps_its_ids():
    cfg = load_config(None, ["seed=0", "tasks.domains={arithmetic: {n_train: 12, n_eval: 4}, math: {n_train: 12, n_eval: 4}}",
                             "schedule.curriculum={levels: [0, 1, 2], exclude: [math]}"])
    train = make_splits(cfg).train
    assert [t.id for t in train if t.domain == "math"] == [f"math-0-{i}" for i in range(12)]


def test_the_scheduler_follows_the_configured_levels_of_a_pooled_domain():
    from posttrain.train.rl import make_scheduler

    cfg = _cfg("arithmetic", [0.0, 1.0, 2.0])
    sched = make_scheduler(cfg, make_splits(cfg).train)
    assert sched.curriculum.levels == {"arithmetic": [0.0, 1.0, 2.0]}
    assert {t.difficulty for t in sched.next_batch(6)} == {0.0}  # drawn at the start level only


def test_levels_a_domain_cannot_tell_apart_are_one_line_errors_naming_them():
    with pytest.raises(ConfigError) as e:  # math stops at 3: levels 3 and 4 make the same tasks' difficulty
        make_splits(_cfg("math", [2.0, 3.0, 4.0]))
    msg = str(e.value)
    assert "\n" not in msg and "'math'" in msg and "levels 3 and 4" in msg


def test_a_plain_config_built_after_a_curriculum_one_gets_its_own_splits():
    plain = ["seed=0", "tasks.domains={arithmetic: {n_train: 24, n_eval: 8}}"]
    make_splits(_cfg("arithmetic", [0.0, 1.0, 2.0]))  # the last build is memoised: its key must hold the curriculum
    assert not any("@" in t.id for t in make_splits(load_config(None, plain)).train)


def test_an_unsteered_curriculum_pools_the_same_tasks_and_draws_from_every_level():
    from posttrain.train.rl import make_scheduler

    steered, pooled = _cfg("arithmetic", CASES["arithmetic"]), _cfg("arithmetic", CASES["arithmetic"],
                                                                    "schedule.curriculum.steer=false")
    train = make_splits(pooled).train
    assert [t.id for t in train] == [t.id for t in make_splits(steered).train]  # the same training tasks
    assert make_scheduler(steered, train).curriculum is not None
    sched = make_scheduler(pooled, train)
    assert sched.curriculum is None
    assert {t.difficulty for t in sched.next_batch(24)} == set(CASES["arithmetic"])
