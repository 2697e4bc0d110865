"""The format rule is per domain: code may span lines; short answers stay on one line."""

import dataclasses

import pytest

from posttrain.tasks import generate_domain
from posttrain.types import Limits, Trajectory, Turn
from posttrain.verifiers.rules import CODE, episode_format_violation, rule_for, task_format_violation


def first(name):
    return generate_domain(name, 1, seed=0)[0]


def traj(task, text):
    return Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", text),), finish_reason="stop")


@pytest.mark.parametrize("name", ["humaneval", "code"])
def test_code_domains_get_the_code_rule(name):
    assert rule_for(first(name)) == CODE


def test_every_canonical_humaneval_solution_is_well_formed():
    tasks = generate_domain("humaneval", 164, seed=0)
    assert [t.id for t in tasks if task_format_violation(t, traj(t, t.oracle))] == []


def test_a_fenced_whole_function_is_well_formed_code():
    t = first("humaneval")
    assert task_format_violation(t, traj(t, "```python\ndef f(x):\n    return x\n```\n")) is None


def test_short_answer_domains_keep_the_one_line_rule():
    t = first("arithmetic")
    assert task_format_violation(t, traj(t, "12\n13")) == "more than one line"


def test_a_labelled_two_line_answer_is_well_formed():
    t = first("conflict")  # ANSWER: ... / CITATIONS: ... (verifiers inside a `weighted` spec)
    assert "\n" in t.oracle and task_format_violation(t, traj(t, t.oracle)) is None


def test_multi_step_budget_grows_with_the_steps():
    t = dataclasses.replace(first("arithmetic"), limits=Limits(max_steps=3))
    assert rule_for(t).max_chars == 6000 and not rule_for(t).single_line
    assert episode_format_violation(first("arithmetic"), traj(t, "a\n" * 2500), 3) is None


def test_metadata_names_the_rule():
    t = first("arithmetic")
    t = dataclasses.replace(t, metadata={**t.metadata, "answer_format": "code"})
    assert rule_for(t) == CODE


def test_long_form_answers_may_span_lines():
    t = first("arithmetic")
    t = dataclasses.replace(t, metadata={"answer_format": "long"})
    assert task_format_violation(t, traj(t, "step 1\nstep 2\n\\boxed{3}")) is None


def test_over_long_code_still_fails():
    t = first("humaneval")
    assert task_format_violation(t, traj(t, "x" * (CODE.max_chars + 1))).startswith("longer than")
