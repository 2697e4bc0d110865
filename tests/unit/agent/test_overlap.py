"""A deliberately slow tool in one episode does not stall generation for the others."""

import dataclasses
import re
import time

from tests.unit.agent.conftest import ScriptedEngine, calc_task, run

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.tasks.tools_impl import tool_fn
from posttrain.types import Environment

SLOW_S = 1.5
WINDOWS: list[tuple[float, float]] = []


@tool_fn("pt_test_slow", "blocks its thread for a while, like a slow tool",
         {"type": "object", "properties": {}, "additionalProperties": False})
def _slow(state):
    t0 = time.monotonic()
    time.sleep(SLOW_S)  # a blocking tool: it runs off the event loop
    WINDOWS.append((t0, time.monotonic()))
    return "slept"


def policy(text):
    """Task 0 calls the slow tool once; every episode makes 3 calculator calls, then answers."""
    a, b = re.search(r"What is (\d+) \* (\d+)", text).groups()
    done = text.count("<|tool|>")
    if a == "1111" and done == 0:
        return format_tool_call("pt_test_slow", {})
    if done < 3 + (a == "1111"):
        return format_tool_call("calculator", {"expression": f"{a}*{b}"})
    return f"The answer is {int(a) * int(b)}."


def test_slow_tool_overlaps_generation_of_other_episodes(tok):
    tasks = [calc_task(0, 1111, 111, max_steps=6)] + [calc_task(i, 2000 + i, 300, max_steps=6) for i in range(1, 6)]
    tasks = [dataclasses.replace(t, environment=Environment(tools=("calculator", "pt_test_slow"))) for t in tasks]
    eng = ScriptedEngine(tok, policy, delay_s=0.05)  # each engine call costs 50 ms
    WINDOWS.clear()
    trajs = run(rollout_agent(eng, tok, tasks, AgentOptions(n=1)))
    assert all(t.verify.passed for t in trajs)
    s, e = WINDOWS[0]  # later entries: tool_use re-runs the calls when it verifies
    during = [c for c in eng.calls if c[0] >= s and c[1] <= e]
    assert len(during) >= 3  # the engine kept generating for the others while the tool ran
    last_other_turn = max(c[1] for c in eng.calls if c[0] < e and c[2] >= 1)
    assert len([c for c in eng.calls if c[0] >= s]) >= 4  # all 4 turns of the others ran after it started
    assert last_other_turn <= e  # ... and before it ended
    assert trajs[0].timings["tool_s"] >= SLOW_S * 0.9
