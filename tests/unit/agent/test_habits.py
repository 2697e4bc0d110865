"""Warm-up habits for the agent headline (rollout/agent_tasks.habit_tasks): each test one property."""

import asyncio

import pytest

from posttrain.rollout.agent_tasks import habit_tasks, plan_variant, product_tasks
from posttrain.tasks.plan import parse_plan
from posttrain.verifiers.compose import verify
from posttrain.types import Trajectory, Turn


def _answer(task, text):
    return Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", text),))


def test_habits_are_seeded():
    tasks = product_tasks(50, 0)
    assert [t.oracle for t in habit_tasks(tasks, 0.85, 0.3, 0.6, 1)] == [t.oracle for t in habit_tasks(tasks, 0.85, 0.3, 0.6, 1)]


def test_habits_keep_prompt_and_verifier():
    tasks = product_tasks(20, 0)
    for a, b in zip(tasks, habit_tasks(tasks, 0.85, 0.3, 0.6, 0)):
        assert (a.id, a.prompt, a.verifier) == (b.id, b.prompt, b.verifier)


def test_guess_rate_follows_the_multiplier():
    tasks = product_tasks(2000, 0)
    out = habit_tasks(tasks, 0.85, 0.3, 0.0, 0)
    small = [len(parse_plan(t.oracle)) == 1 for t in out if int(t.prompt[-1].content.split("* ")[1][:-1]) < 550]
    large = [len(parse_plan(t.oracle)) == 1 for t in out if int(t.prompt[-1].content.split("* ")[1][:-1]) >= 550]
    assert abs(sum(small) / len(small) - 0.85) < 0.05 and abs(sum(large) / len(large) - 0.3) < 0.05


def test_a_guess_is_an_estimate_the_verifier_fails():
    task = product_tasks(1, 0)[0]
    guess = parse_plan(habit_tasks([task], 1.0, 1.0, 0.0, 0)[0].oracle)
    assert len(guess) == 1 and guess[0]["answer"].startswith("The answer is about ")
    r = asyncio.run(verify(task, _answer(task, guess[0]["answer"])))
    assert not r.passed and r.score == 0.0


def test_recheck_evaluates_the_result_again_before_answering():
    plan = [{"tool": "calculator", "arguments": {"expression": "2*3"}}, {"answer": "The answer is 6."}]
    assert plan_variant(plan, "recheck", "6") == [plan[0], {"tool": "calculator", "arguments": {"expression": "6"}}, plan[1]]


@pytest.mark.parametrize("bad", [(1.5, 0.3, 0.6), (0.8, -0.1, 0.6)])
def test_bad_habit_probability_is_named(bad):
    with pytest.raises(ValueError, match="habit probability"):
        habit_tasks(product_tasks(2, 0), *bad, 0)


def test_habits_reject_tasks_that_are_not_products():
    from dataclasses import replace

    task = replace(product_tasks(1, 0)[0], metadata={"kind": "purchase"})
    with pytest.raises(ValueError, match="not a calculator-product task"):
        habit_tasks([task], 0.5, 0.5, 0.5, 0)
