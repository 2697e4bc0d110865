"""schedule.name=fixed_order: step s replays line s of the order file by task id, resumes at the
next line, and refuses (one line) an order naming a task outside the split or of the wrong size."""

import json

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config, check_rl_splits
from posttrain.errors import ConfigError
from posttrain.schedule import Scheduler
from posttrain.schedule.fixed_order import load_order
from posttrain.tasks.splits import Splits

from .sched_helpers import group, make_tasks


@pytest.fixture
def tasks():
    return make_tasks(12)


def write(tmp_path, text, name="order.txt"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_each_step_gets_its_line_in_order(tmp_path, tasks):
    order = write(tmp_path, "# replayed from TRL\ncode-3 arith-0, arith-4\n\narith-2 code-1 code-5\n")
    s = Scheduler(tasks, {"arith": 0.5, "code": 0.5}, policy="fixed_order", order_file=order)
    first = s.next_batch(3)
    s.observe([group(t, [0.0, 1.0]) for t in first])
    second = s.next_batch(3)
    assert [t.id for t in first] == ["code-3", "arith-0", "arith-4"]
    assert [t.id for t in second] == ["arith-2", "code-1", "code-5"]  # mixture shares do not reshuffle it


def test_resume_continues_at_the_next_line(tmp_path, tasks):
    order = write(tmp_path, json.dumps([["arith-0"], ["code-1"], ["arith-2"]]), "order.json")
    a = Scheduler(tasks, policy="fixed_order", order_file=order)
    a.observe([group(t, [1.0]) for t in a.next_batch(1)])
    b = Scheduler(tasks, policy="fixed_order", order_file=order)
    b.load_state_dict(a.state_dict())
    assert [t.id for t in b.next_batch(1)] == ["code-1"]


def test_past_the_last_line_is_an_error_not_a_silent_draw(tmp_path, tasks):
    s = Scheduler(tasks, policy="fixed_order", order_file=write(tmp_path, "arith-0\n"))
    s.next_batch(1)
    with pytest.raises(ConfigError, match="has 1 steps; step 1 was asked for"):
        s.next_batch(1)


def test_an_id_outside_the_tasks_is_refused_when_the_scheduler_is_built(tmp_path, tasks):
    with pytest.raises(ConfigError, match="step 1 names task 'nope'"):
        Scheduler(tasks, policy="fixed_order", order_file=write(tmp_path, "arith-0\nnope\n"))


@pytest.mark.parametrize("policy, args, named", [
    ("fixed_order", {}, "the fixed_order policy and an order file go together"),
    ("uniform", {"order_file": "x.txt"}, "the fixed_order policy and an order file go together"),
])
def test_policy_and_order_file_go_together(policy, args, named, tasks):
    with pytest.raises(ConfigError, match=named):
        Scheduler(tasks, policy=policy, **args)


def test_an_id_that_is_an_sft_demonstration_is_not_in_the_rl_split(tmp_path, tasks):
    cfg = load_config(None, ["schedule.name=fixed_order", f"schedule.args.order_file={write(tmp_path, 'arith-0')}",
                             "rl.prompts_per_step=1", "rl.steps=1"])
    check_rl_splits(cfg, Splits(tasks, [], []))
    with pytest.raises(ConfigError, match="names task 'arith-0', which is not in the RL split"):
        check_rl_splits(cfg, Splits(tasks, [], [tasks[0]]))


@pytest.mark.parametrize("text, overrides, named", [
    ("arith-0 code-1\n", ["rl.prompts_per_step=3", "rl.steps=1"], "step 0 names 2 tasks; rl.prompts_per_step=3"),
    ("arith-0\n", ["rl.prompts_per_step=1", "rl.steps=2"], "has 1 steps; rl.steps=2 needs as many"),
])
def test_order_file_shape_is_checked_at_config_load(tmp_path, text, overrides, named):
    cfg = load_config(None, ["schedule.name=fixed_order", f"schedule.args.order_file={write(tmp_path, text)}",
                             "tasks.domains={arithmetic: {n_train: 8, n_eval: 2}}", *overrides])
    with pytest.raises(ConfigError, match=named):
        check_config(cfg, needs=("rl",))


def test_a_missing_order_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="order file not found"):
        load_order(tmp_path / "none.txt")
