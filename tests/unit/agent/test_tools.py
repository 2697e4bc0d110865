"""Tools: registry, per-task tool sets, and execution that never raises for what a tool did."""

import asyncio
import time

from tests.unit.agent.conftest import calc_task, run, shell_task

from posttrain.registry import registry
from posttrain.rollout.agent.tools import execute, get_tool, tools_for_task
from posttrain.tasks.tools_impl import tool_fn


@tool_fn("pt_test_hang_async", "hangs", {"type": "object", "properties": {}})
async def _hang_async(state):
    await asyncio.sleep(3600)


@tool_fn("pt_test_hang_sync", "hangs in a thread", {"type": "object", "properties": {}})
def _hang_sync(state):
    time.sleep(30)


@tool_fn("pt_test_buggy", "raises", {"type": "object", "properties": {}})
def _buggy(state):
    return {}["missing"]


def test_builtins_are_registered_with_schemas():
    names = registry("tool").names()
    for n in ("bash", "python", "read_file", "write_file", "submit", "calculator", "lookup", "convert",
              "scene_add_object"):
        assert n in names
        t = get_tool(n)
        assert t.schema["type"] == "object" and t.timeout_s > 0
    assert get_tool("submit").ends_episode and get_tool("bash").needs_session


def test_tool_sets_follow_the_task():
    assert set(tools_for_task(calc_task())) == {"calculator", "submit"}
    assert set(tools_for_task(shell_task())) == {"shell", "submit", "bash", "python", "read_file", "write_file"}


def test_tool_error_becomes_an_error_observation():
    obs = run(execute(get_tool("lookup"), {"table": "t", "key": "k"}, {"tables": {}}))
    assert obs.result.status == "nonzero_exit" and obs.text.startswith("error: lookup: no table")


def test_a_bug_in_a_tool_is_an_observation_not_a_crash():
    obs = run(execute(get_tool("pt_test_buggy"), {}, {}))
    assert obs.result.status == "nonzero_exit" and "KeyError" in obs.text


def test_hanging_async_tool_hits_its_timeout():
    obs = run(execute(get_tool("pt_test_hang_async"), {}, {}, timeout_s=0.2))  # a hang would meet pytest's timeout
    assert obs.result.status == "timeout" and "timed out after 0.2s" in obs.text


def test_hanging_sync_tool_hits_its_timeout_without_blocking_the_loop():
    obs = run(execute(get_tool("pt_test_hang_sync"), {}, {}, timeout_s=0.2))  # returns: the daemon thread does not hold exit
    assert obs.result.status == "timeout"


def test_session_tools_without_a_session_say_so():
    obs = run(execute(get_tool("bash"), {"command": "ls"}, {}))
    assert obs.result.status == "nonzero_exit" and "no sandbox session" in obs.text



def test_calculator_garbage_is_an_error_observation_without_parser_warnings():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # what would reach the user's console during training
        obs = run(execute(get_tool("calculator"), {"expression": "1if 2 else 3"}, {}, 5.0))
    assert obs.result.status != "ok" and "calculator" in obs.text
    assert not [w for w in seen if issubclass(w.category, SyntaxWarning)]
