"""Warm-up habits for the agent headline (rollout/agent_tasks.habit_tasks): each test one property."""

import asyncio

import pytest

from posttrain.rollout.agent.tasks import REREAD, habit_tasks, plan_variant, product_tasks, reread_tasks, rereads
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


def test_reread_returns_the_question_framed_like_the_user_turn():
    """The re-read path copies operands at the same relative offset as the direct one."""
    from posttrain.models.tiny import build_tokenizer
    from posttrain.rollout.agent.sft import plan_demonstrations

    tok = build_tokenizer()
    task = reread_tasks(product_tasks(1, 0, task_table=True), 1.0, 0)[0]
    prompt, segs = asyncio.run(plan_demonstrations(tok, [task]))[0]
    assert tok.decode(list(segs[1][0])) == f"<|tool|>{task.prompt[-1].content}<|end|><|assistant|>"
    assert tok.decode(list(prompt)).endswith(f"<|user|>{task.prompt[-1].content}<|end|><|assistant|>")


def test_reread_share_is_seeded_and_skips_guesses():
    tasks = product_tasks(1000, 0, task_table=True)
    out = reread_tasks(habit_tasks(tasks, 0.5, 0.5, 0.0, 0), 0.5, 1)
    assert [t.oracle for t in out] == [t.oracle for t in reread_tasks(habit_tasks(tasks, 0.5, 0.5, 0.0, 0), 0.5, 1)]
    plans = [parse_plan(t.oracle) for t in out]
    assert not any(p[0] == REREAD for p in plans if len(p) == 2)  # an estimate stays one answer, never re-read
    calling = [p for p in plans if any(s.get("tool") == "calculator" for s in p)]
    assert abs(sum(p[0] == REREAD for p in calling) / len(calling) - 0.5) < 0.06


def test_a_solved_reread_episode_scores_less_than_a_direct_one():
    """The step-efficiency reward is what RL removes the re-read with: 3 steps where 2 suffice."""
    from posttrain.types import ToolCall

    task = product_tasks(1, 0, task_table=True)[0]
    plan = parse_plan(task.oracle)
    call = Turn("assistant", "", tool_call=ToolCall("calculator", plan[0]["arguments"]))
    final = Turn("assistant", plan[1]["answer"])
    reread = Turn("assistant", "", tool_call=ToolCall("lookup", REREAD["arguments"]))

    def score(turns):
        return asyncio.run(verify(task, Trajectory(task.id, task.version, task.domain, (), turns)))

    direct, longer = score((call, final)), score((reread, call, final))
    assert direct.passed and longer.passed and longer.score < direct.score == 1.0
    assert rereads(Trajectory(task.id, task.version, task.domain, (), (reread, call, final)))


def test_reread_needs_the_task_table():
    with pytest.raises(ValueError, match="offers no lookup tool"):
        reread_tasks(product_tasks(2, 0), 0.5, 0)
