"""Adversarial episodes: hanging tools, output floods, dying sandboxes, many sessions at once."""

import asyncio
import dataclasses
import os
import time

import pytest
from tests.unit.agent.conftest import ScriptedEngine, calc_task, run, shell_task, steps_policy

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.sandbox import SandboxPool
from posttrain.tasks.tools_impl import tool_fn
from posttrain.train.rl import estimate_advantages
from posttrain.types import Environment


SLEEPY_CALLS = []


@tool_fn("pt_test_sleepy", "never returns (the first time: tool_use re-runs calls when it verifies)",
         {"type": "object", "properties": {}}, timeout_s=0.3)
async def _sleepy(state):
    SLEEPY_CALLS.append(1)
    if len(SLEEPY_CALLS) == 1:
        await asyncio.sleep(3600)
    return "awake"


@tool_fn("pt_test_flood", "returns 100 MB", {"type": "object", "properties": {}})
def _flood(state):
    return "x" * (100 << 20)


def with_tools(task, *names):
    return dataclasses.replace(task, environment=Environment(tools=task.environment.tools + names))


def with_sandbox(coro_fn):
    async def main():
        pool = SandboxPool(concurrency=2)
        try:
            return await coro_fn(pool), pool
        finally:
            await pool.close()
    return run(main())


def test_hanging_tool_times_out_and_the_episode_goes_on(tok):
    policy = steps_policy(format_tool_call("pt_test_sleepy", {}), format_tool_call("calculator", {"expression": "4821*937"}),
                          "The answer is 4517277.")
    t = run(rollout_agent(ScriptedEngine(tok, policy), tok, [with_tools(calc_task(), "pt_test_sleepy")], AgentOptions()))[0]
    assert t.turns[1].exec_result.status == "timeout" and "timed out after 0.3s" in t.turns[1].text
    assert t.finish_reason == "answer" and t.verify.passed


def test_100mb_tool_output_is_truncated_with_a_marker(tok):
    policy = steps_policy(format_tool_call("pt_test_flood", {}), "The answer is 4517277.")
    t = run(rollout_agent(ScriptedEngine(tok, policy), tok, [with_tools(calc_task(), "pt_test_flood")],
                          AgentOptions(obs_max_chars=300)))[0]
    obs = t.turns[1].text
    assert len(obs) < 400 and f"[truncated {(100 << 20) - 300} chars]" in obs
    assert t.turns[1].exec_result.stdout_truncated and len(t.turns[1].exec_result.stdout) <= 1 << 16


def test_100mb_shell_output_is_truncated_with_a_marker(tok):
    policy = steps_policy(format_tool_call("bash", {"command": "head -c 100000000 /dev/zero | tr '\\0' y"}),
                          format_tool_call("submit", {}))
    (trajs, _) = with_sandbox(lambda pool: rollout_agent(ScriptedEngine(tok, policy), tok, [shell_task()],
                                                         AgentOptions(obs_max_chars=500), sandbox=pool))
    obs = trajs[0].turns[1]
    assert "[truncated" in obs.text and len(obs.text) < 600
    assert obs.exec_result.stdout_truncated  # the sandbox capped it first, and says so


def test_sandbox_dying_mid_episode_is_an_infra_error_retried_and_kept_out_of_the_gradient(tok):
    kill = format_tool_call("bash", {"command": "kill -9 $$"})
    ok = [format_tool_call("bash", {"command": "echo hello > out.txt"}), format_tool_call("submit", {})]
    attempts = []

    def policy(text):
        n = text.count("<|assistant|>") - 1
        if n == 0:
            attempts.append(1)
        if len(attempts) == 1:  # the first attempt kills its shell, then tries to use it
            return kill if n == 0 else ok[0]
        return ok[min(n, 1)]

    (trajs, _) = with_sandbox(lambda pool: rollout_agent(ScriptedEngine(tok, policy), tok, [shell_task()],
                                                         AgentOptions(retries=1), sandbox=pool))
    assert trajs[0].timings["attempts"] == 2 and trajs[0].verify.passed  # retried, then fine

    (trajs, _) = with_sandbox(lambda pool: rollout_agent(ScriptedEngine(tok, lambda text: kill), tok, [shell_task()],
                                                         AgentOptions(retries=1, n=2), sandbox=pool))
    assert all(t.infra_error and t.error.boundary == "sandbox" for t in trajs)
    assert trajs[0].timings["attempts"] == 2
    fine = run(rollout_agent(ScriptedEngine(tok, steps_policy("The answer is 4517277.")), tok, [calc_task()],
                             AgentOptions(n=2)))
    adv = estimate_advantages([list(trajs) + fine], "group_norm")
    assert adv[:2].tolist() == [0.0, 0.0]


@pytest.mark.slow
def test_64_concurrent_sessions_no_deadlock_and_nothing_left_behind(tok):
    from posttrain.sandbox.runtime import workspace_root

    policy = steps_policy(format_tool_call("bash", {"command": "sleep 0.2; echo hello > out.txt"}),
                          format_tool_call("bash", {"command": "cat out.txt"}), format_tool_call("submit", {}))
    # Only this process's workspaces (ws-<pid>-<n>): the directory is shared by every posttrain
    # process of this uid, and under `make test` the other xdist worker's live sessions are in it.
    mine = f"ws-{os.getpid()}-"
    before = {d for d in os.listdir(workspace_root()) if d.startswith(mine)}

    async def go(pool):
        return await asyncio.wait_for(rollout_agent(ScriptedEngine(tok, policy), tok, [shell_task(i) for i in range(64)],
                                                    AgentOptions(concurrency=64), sandbox=pool), 90)

    trajs, pool = with_sandbox(go)
    assert len(trajs) == 64 and all(t.verify.passed for t in trajs)
    assert not pool._sessions and {d for d in os.listdir(workspace_root()) if d.startswith(mine)} <= before
