"""The agent loop on a blender_scene task: tool calls into one real Blender per episode.

The model is scripted (it replays the oracle chain, or saves an empty scene); the loop, the
Blender session, the tools and the `blender_scene_match` verifier (replay in a fresh
Blender, inspection of the saved file in another) are the real ones. Skipped, saying why,
without the bpy runtime (`make blender`).
"""

from __future__ import annotations

import pytest

from tests.unit.agent.conftest import ScriptedEngine, run, steps_policy

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.tasks.blender_runtime import missing_reason
from posttrain.tasks.plan import parse_plan

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))


@pytest.fixture(scope="module")
def task():
    from posttrain.tasks.blender_scene import BlenderSceneDomain

    return BlenderSceneDomain().generate(1, seed=7, difficulty=1)[0]


def _episode(tok, task, replies):
    return run(rollout_agent(ScriptedEngine(tok, steps_policy(*replies), max_len=16384), tok, [task], AgentOptions()))[0]


def test_oracle_chain_through_the_loop_passes_with_its_step_count(tok, task):
    calls = [format_tool_call(s["tool"], s["arguments"]) for s in parse_plan(task.oracle) if "tool" in s]
    t = _episode(tok, task, calls + [format_tool_call("submit", {})])
    assert t.verify.passed and t.reward > 0, t.verify.details
    assert [x.exec_result.status for x in t.turns if x.role == "tool"] == ["ok"] * len(calls)


def test_saving_an_empty_scene_scores_zero(tok, task):
    t = _episode(tok, task, [format_tool_call("blender_save", {}), format_tool_call("submit", {})])
    assert not t.verify.passed and t.reward == 0.0
