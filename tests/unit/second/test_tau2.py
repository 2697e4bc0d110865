"""τ²-bench environments: gold replays score 1, doing nothing scores 0, a hostile agent cannot forge the state."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("tau2")

from posttrain.registry import build  # noqa: E402
from posttrain.tasks.tau2 import gold_trajectory  # noqa: E402
from posttrain.tasks.tau2_env import Tau2Env, gold_hash, tau2_tasks  # noqa: E402
from posttrain.types import ToolCall, Trajectory, Turn  # noqa: E402
from posttrain.verifiers.base import VerifyContext  # noqa: E402


def score(task, traj):
    return asyncio.run(build(task.verifier, kind="verifier")(task, traj, VerifyContext()))


def tasks(dom, n):
    return build(f"tau2_{dom}", kind="domain").generate(n, seed=0)


# The package lists no gold actions for this task: its env assertion (task_2 completed) needs a call
# the data does not give, so tau2's own evaluator scores its gold replay 0 as well.
NO_GOLD = {"update_task_with_history_and_env_assertions"}


def test_gold_replay_scores_one_on_every_mock_task_that_has_gold_actions():
    ts = build("tau2_mock", kind="domain", split=None).generate(100, seed=0)
    assert len(ts) == 9
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


def _changes_state_or_must_say(t) -> bool:
    dom, tid = t.metadata["tau2_domain"], t.metadata["tau2_task_id"]
    crit = tau2_tasks(dom)[tid].evaluation_criteria
    start = Tau2Env.fresh(dom, tid)
    return gold_hash(dom, tid) != (start.db_hash(), start.user_db_hash()) or bool(crit.communicate_info)


def test_an_agent_that_does_nothing_scores_zero():
    ts = [t for t in build("tau2_mock", kind="domain", split=None).generate(100, seed=0)
          if _changes_state_or_must_say(t)]
    assert len(ts) >= 5
    idle = [Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", "Hello, how can I help?"),)) for t in ts]
    assert [score(t, x).score for t, x in zip(ts, idle)] == [0.0] * len(ts)


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
    t = next(t for t in tasks("retail", 114) if len(json.loads(t.oracle)) >= 3 and "modify" in t.oracle)
    gold = gold_trajectory(t)
    writes = [i for i, x in enumerate(gold.turns) if x.tool_call and not x.tool_call.name.startswith(("get_", "find_"))]
    partial = gold.turns[:writes[-1]] + gold.turns[writes[-1] + 1:]
    assert score(t, Trajectory(t.id, t.version, t.domain, (), partial)).score == 0.0


def test_the_prompt_carries_policy_and_tools_and_the_user_scenario_is_kept_for_the_simulator():
    t = tasks("airline", 1)[0]
    assert "book_reservation" in t.prompt[0].content and "# Airline Agent Policy" in t.prompt[0].content
    assert "Instructions" in t.metadata["user_scenario"] or "instructions" in t.metadata["user_scenario"]
