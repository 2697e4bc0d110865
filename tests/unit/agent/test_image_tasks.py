"""The agent loop on a terminal-set task: multi-step tool calls in the task's image, scored by its tests.

The model is scripted (it replays the reference's shell steps, or does nothing); the
loop, the sandbox session in the image, the tool calls and the `image_test` verifier are
the real ones -- the path an agent RL run takes on these tasks.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.unit.agent.conftest import ScriptedEngine, run, steps_policy

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.sandbox import SandboxPool
from posttrain.tasks.plan import parse_plan


@pytest.fixture(scope="module")
def task():
    if shutil.which("mmdebstrap") is None or os.geteuid() != 0:
        pytest.skip("the task's image needs mmdebstrap and root to build (apt-get install -y mmdebstrap)")
    from posttrain.tasks.harbor import load_harbor_task
    from posttrain.tasks.terminal_images import SET_DIR

    return load_harbor_task(SET_DIR / "fix-median")


def _episode(tok, task, replies):
    async def main():
        pool = SandboxPool(concurrency=2)
        try:
            return await rollout_agent(ScriptedEngine(tok, steps_policy(*replies)), tok, [task], AgentOptions(), sandbox=pool)
        finally:
            await pool.close()

    return run(main())[0]


def test_reference_steps_through_the_loop_pass_and_count(tok, task):
    cmds = [s["arguments"]["cmd"] for s in parse_plan(task.oracle) if "tool" in s]
    t = _episode(tok, task, [format_tool_call("bash", {"command": c}) for c in cmds] + [format_tool_call("submit", {})])
    assert t.verify.passed and t.reward > 0
    tool_turns = [x for x in t.turns if x.role == "tool"]
    assert len(tool_turns) == task.metadata["reference_steps"]  # one observation per shell step; submit ends it


def test_a_model_that_does_nothing_fails(tok, task):
    t = _episode(tok, task, [format_tool_call("submit", {})])
    assert not t.verify.passed and t.reward == 0.0
