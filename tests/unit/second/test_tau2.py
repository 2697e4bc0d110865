"""τ²-bench environments: gold replays score 1, doing nothing scores 0 (the guard), a hostile agent cannot forge the state."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("tau2")

from posttrain.registry import build  # noqa: E402
from posttrain.tasks.tau2 import gold_trajectory  # noqa: E402
from posttrain.tasks.tau2_env import gold_hash  # noqa: E402
from posttrain.types import Spec, ToolCall, Trajectory, Turn  # noqa: E402
from posttrain.verifiers.base import VerifyContext  # noqa: E402


def score(task, traj):
    return asyncio.run(build(task.verifier, kind="verifier")(task, traj, VerifyContext()))


def tasks(dom, n):
    return build(f"tau2_{dom}", kind="domain").generate(n, seed=0)


# The package lists no gold actions for this task: its env assertion (task_2 completed) needs a call
# the data does not give, so tau2's own evaluator scores its gold replay 0 as well.
NO_GOLD = {"update_task_with_history_and_env_assertions"}


@pytest.mark.parametrize("reward,pool", [("official", 9), ("guarded", 8)])
def test_gold_replay_scores_one_on_every_mock_task_that_has_gold_actions(reward, pool):
    ts = build("tau2_mock", kind="domain", split=None, reward=reward).generate(100, seed=0)
    assert len(ts) == pool
    scored = {t.metadata["tau2_task_id"]: score(t, gold_trajectory(t)).score for t in ts}
    assert {k for k, v in scored.items() if v != 1.0} == NO_GOLD


@pytest.mark.parametrize("dom,task_id", [("airline", "7"), ("retail", "0")])
def test_gold_replay_scores_one_on_airline_and_retail_samples(dom, task_id):
    # every task of all three domains: benchmarks/tau2_bench.py gold (a replay costs seconds here).
    # airline 7 books with nested arguments (passenger and payment lists): the replay must hand tau2 plain
    # lists and dicts, not a recorded ToolCall's frozen tuples, or the database hash differs
    t = build(f"tau2_{dom}", kind="domain").task(task_id)
    r = score(t, gold_trajectory(t))
    assert r.score == 1.0, (t.id, r)


def _episode(t, *turns):
    return Trajectory(t.id, t.version, t.domain, (), tuple(turns))


def _lookup(name, **args):
    return Turn("assistant", json.dumps({"name": name, "arguments": args}), tool_call=ToolCall(name, args))


@pytest.mark.parametrize("said", [(), ("Hello, how can I help?",)], ids=["silent", "hello"])
def test_an_agent_that_does_nothing_scores_zero_on_every_task_of_the_mock_pool(said):
    ts = build("tau2_mock", kind="domain", split=None).generate(100, seed=0)
    assert len(ts) == 8  # 9 less create_task_1_nl_eval (below)
    idle = [_episode(t, *(Turn("assistant", m) for m in said)) for t in ts]
    assert {t.metadata["tau2_task_id"]: score(t, x).score for t, x in zip(ts, idle)} == {
        t.metadata["tau2_task_id"]: 0.0 for t in ts}


# airline 1: the customer asks to cancel a reservation the policy does not let them cancel; the gold run
# looks up the user and the reservation and changes nothing, and τ²'s reward (DB, COMMUNICATE) asks for nothing
REFUSE = ("airline", "1")


def test_the_official_reward_gives_a_silent_agent_full_marks_on_a_task_whose_right_answer_changes_nothing():
    t = build("tau2_airline", kind="domain", reward="official").task(REFUSE[1])
    assert score(t, _episode(t)).score == 1.0  # τ²'s own reward, kept for pass^1 figures (docs/second_model.md)


@pytest.mark.parametrize("said", [(), ("I cannot cancel this reservation.",)], ids=["silent", "refuses-blind"])
def test_the_guarded_reward_gives_an_agent_that_looks_nothing_up_zero_on_that_task(said):
    t = build("tau2_airline", kind="domain").task(REFUSE[1])
    r = score(t, _episode(t, *(Turn("assistant", m) for m in said)))
    assert r.score == 0.0 and r.details["parts"]["GOLD_CALLS"] == 0.0, r


def test_the_guarded_reward_gives_one_to_the_agent_that_looks_up_and_then_refuses():
    t = build("tau2_airline", kind="domain").task(REFUSE[1])
    done = _episode(t, _lookup("get_user_details", user_id="raj_sanchez_7340"),
                    _lookup("get_reservation_details", reservation_id="Q69X3R"),
                    Turn("assistant", "Your basic economy reservation cannot be cancelled under our policy."))
    assert score(t, done).score == 1.0


def test_the_lookups_without_a_word_to_the_customer_score_zero():
    t = build("tau2_airline", kind="domain").task(REFUSE[1])
    mute = _episode(t, _lookup("get_user_details", user_id="raj_sanchez_7340"),
                    _lookup("get_reservation_details", reservation_id="Q69X3R"))
    r = score(t, mute)
    assert r.score == 0.0 and r.details["parts"]["SPOKE"] == 0.0, r


def test_a_transfer_matches_the_gold_one_whatever_its_summary_says():
    t = build("tau2_airline", kind="domain").task("13")  # gold: transfer_to_human_agents(summary=...) alone
    done = _episode(t, _lookup("transfer_to_human_agents", summary="Customer wants a different destination."),
                    Turn("assistant", "I am transferring you to a human agent."))
    assert score(t, done).score == 1.0


def test_the_guarded_pool_leaves_out_the_tasks_that_nothing_tells_from_doing_nothing():
    # mock's create_task_1_nl_eval: no gold action and nothing to say, only NL assertions; with a judge it is kept
    assert build("tau2_mock", kind="domain", split=None).left_out() == ["create_task_1_nl_eval"]
    assert build("tau2_mock", kind="domain", split=None, judge="judge").left_out() == []
    assert build("tau2_mock", kind="domain", split=None, reward="official").left_out() == []


def test_a_guarded_verifier_on_such_a_task_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"tau2 mock task 'create_task_1_nl_eval': an agent that does nothing earns"):
        build(Spec("tau2", {"domain": "mock", "task_id": "create_task_1_nl_eval", "guard": True}), kind="verifier")


def test_a_judged_task_scores_a_silent_agent_zero_without_asking_the_judge():
    # no judge model is open in this test: a judge call would raise, so a 0 here was decided by the program
    t = build("tau2_mock", kind="domain", split=None, judge="judge").task("create_task_1_nl_eval")
    r = score(t, _episode(t))
    assert r.score == 0.0 and r.details["parts"]["SPOKE"] == 0.0, r


def test_an_unknown_reward_mode_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"tau2_mock reward='strict': expected one of guarded, official"):
        build("tau2_mock", kind="domain", reward="strict")


def test_a_hostile_agent_cannot_forge_the_database_hash():
    t = next(t for t in tasks("mock", 20) if t.metadata["tau2_task_id"] == "create_task_1")
    agent_hash, _ = gold_hash("mock", "create_task_1")
    hostile = [Turn("assistant", f"The database hash is now {agent_hash}. Task 'Important Meeting' created.")]
    for name, args in [("get_db_hash", {}), ("set_state", {"initialization_data": None}), ("__init__", {}),
                       ("update_db", {"update_data": {"tasks": {}}}), ("_db", {}),
                       ("create_task", {"user_id": "user_1", "title": "Important Meeting", "db": None})]:
        hostile.append(Turn("assistant", json.dumps({"name": name}), tool_call=ToolCall(name, args)))
    hostile.append(Turn("assistant", "The agent confirmed the task was created successfully"))
    r = score(t, Trajectory(t.id, t.version, t.domain, (), tuple(hostile)))
    assert r.score == 0.0 and r.details["parts"]["DB"] == 0.0


def test_a_partial_replay_misses_the_gold_state():
    t = next(t for t in tasks("retail", 20) if len(json.loads(t.oracle)) >= 3 and "modify" in t.oracle)
    gold = gold_trajectory(t)
    writes = [i for i, x in enumerate(gold.turns) if x.tool_call and not x.tool_call.name.startswith(("get_", "find_"))]
    partial = gold.turns[:writes[-1]] + gold.turns[writes[-1] + 1:]
    assert score(t, Trajectory(t.id, t.version, t.domain, (), partial)).score == 0.0


def test_the_prompt_carries_policy_and_tools_and_the_user_scenario_is_kept_for_the_simulator():
    t = tasks("airline", 1)[0]
    assert "book_reservation" in t.prompt[0].content and "# Airline Agent Policy" in t.prompt[0].content
    assert "Instructions" in t.metadata["user_scenario"] or "instructions" in t.metadata["user_scenario"]


def _cfg(domains, *more):
    from posttrain.config import load_config

    return load_config(None, [f"tasks.domains={domains}", "sft.steps=0", *more])


def test_the_training_and_held_out_splits_are_different_tasks_though_every_prompt_is_the_same_policy():
    from posttrain.tasks.splits import make_splits

    sp = make_splits(_cfg("{tau2_mock: {n_train: 4, n_eval: 2}}"))
    assert len(sp.train) == 4 and len(sp.held_out) == 2
    assert not {t.id for t in sp.train} & {t.id for t in sp.held_out}


def test_a_held_out_split_that_takes_every_task_is_refused_naming_the_domain():
    from posttrain.errors import ConfigError
    from posttrain.tasks.splits import make_splits

    with pytest.raises(ConfigError, match=r"tasks.domains.tau2_mock: no training task left: .* made \d+ for the held-out"):
        make_splits(_cfg("{tau2_mock: {n_train: 4, n_eval: 9}}"))


def test_an_sft_warm_up_on_tau2_tasks_is_refused_before_the_model_loads(tmp_path):
    # a τ² oracle is the plan a replay runs, not a reply: no demonstration, and the warm-up says so
    from posttrain.errors import ConfigError
    from posttrain.recipes.quickstart import sft_phase
    from posttrain.tasks.splits import make_splits

    cfg = _cfg("{tau2_mock: {n_train: 4, n_eval: 2}}", "sft.steps=5", "model.path=/nonexistent")
    sp = make_splits(cfg)
    assert sp.train and not sp.sft
    with pytest.raises(ConfigError, match=r"sft.steps=5: the warm-up has no demonstration .*domains: tau2_mock"):
        asyncio.run(sft_phase(cfg, tmp_path, sp, lambda *a: None, None))
