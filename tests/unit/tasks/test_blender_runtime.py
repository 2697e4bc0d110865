"""Real Blender (bpy 5.0.1) in its sandbox: one session per episode, the verifier end to end.

Skipped, saying why, when the runtime is absent (`make blender` builds it; `make test` tries).
Each test pays one or two Blender starts (about 1.5-4 s each on the 2-core machine).
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from posttrain.tasks.blender_runtime import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))


def _traj(task, plan):
    from posttrain.tasks.plan import _traj as make, parse_plan
    from posttrain.types import ToolCall, Turn

    return make(task, [Turn("assistant", json.dumps(s), tool_call=ToolCall(s["tool"], s.get("arguments", {}), id=f"c{i}"))
                       for i, s in enumerate(parse_plan(plan)) if "tool" in s])


def _verify(task, plan):
    from posttrain.verifiers.base import VerifyContext
    from posttrain.verifiers.blender_scene import BlenderSceneMatch

    return asyncio.run(BlenderSceneMatch()(task, _traj(task, plan), VerifyContext()))


def test_one_session_holds_the_scene_across_calls_and_refusals_are_observations():
    from posttrain.tasks.tools_impl import ToolError, call_tool

    state: dict = {}
    try:
        asyncio.run(call_tool("blender_add_primitive", {"name": "box", "shape": "cube", "location": [1, 2, 3]}, state))
        session = state["blender"]
        with pytest.raises(ToolError, match="already exists"):
            asyncio.run(call_tool("blender_add_primitive", {"name": "box", "shape": "cube"}, state))
        with pytest.raises(ToolError, match="no object named 'ghost'"):
            asyncio.run(call_tool("blender_delete", {"name": "ghost"}, state))
        scene = json.loads(asyncio.run(call_tool("blender_query_scene", {}, state)))
        assert state["blender"] is session and [o["location"] for o in scene["objects"]] == [[1.0, 2.0, 3.0]]
    finally:
        if state.get("blender"):
            state["blender"].close()


def test_sandboxed_blender_has_no_network_and_a_read_only_bpy():
    from posttrain.tasks.blender_session import BlenderSession

    with BlenderSession() as s:
        s.call("add_primitive", {"name": "box", "shape": "cube"})
        with pytest.raises(Exception, match="Permission denied|Read-only"):  # bpy's own tree is bound read-only
            s.call("save", {"filename": "../opt/bpy/owned.blend"})
        ifaces = [ln.split(":")[0].strip() for ln in open(f"/proc/{s.sandbox_pid}/net/dev").read().splitlines()[2:]]
        assert ifaces == ["lo"]
    with BlenderSession() as s:
        # the inspector reads only what it is told; a path outside /work is refused by the sandbox's filesystem
        with pytest.raises(Exception):
            s.call("inspect", {"path": "/etc/shadow"})


def test_oracle_passes_and_hack_probes_score_zero_on_a_suite_task():
    from posttrain.eval.suite import load_suite
    from posttrain.tasks.blender_scene import BlenderSceneDomain, hack_plans

    task = next(t for t in load_suite("blender_scene").tasks if t.difficulty == 2)
    r = _verify(task, task.oracle)
    assert r.passed and r.score == 1.0, r.details
    for name, plan in hack_plans(task).items():
        assert _verify(task, plan).score == 0.0, name
    assert not _verify(task, BlenderSceneDomain().wrong_answer(task, random.Random(1))).passed


def test_a_sandbox_that_cannot_start_is_an_infrastructure_error_not_the_models(monkeypatch, tmp_path):
    import posttrain.tasks.blender_session as bs
    from posttrain.errors import SandboxError
    from posttrain.tasks.tools_impl import call_tool

    monkeypatch.setattr(bs, "WORKER", tmp_path / "missing_worker.py")  # bwrap's bind of it fails
    with pytest.raises(bs.BlenderDown, match="did not start|exited"):
        bs.BlenderSession()
    with pytest.raises(SandboxError):
        asyncio.run(call_tool("blender_add_primitive", {"name": "box", "shape": "cube"}, {}))


def test_the_scene_refuses_cycles_self_booleans_and_runaway_geometry():
    from posttrain.tasks.blender_session import BlenderRefused, BlenderSession

    with BlenderSession() as s:
        for name in ("a", "b"):
            s.call("add_primitive", {"name": name, "shape": "cube"})
        s.call("parent", {"child": "b", "parent": "a"})
        with pytest.raises(BlenderRefused, match="cycle"):
            s.call("parent", {"child": "a", "parent": "b"})
        with pytest.raises(BlenderRefused, match="other than"):
            s.call("add_modifier", {"object": "a", "type": "boolean", "target": "a"})
        s.call("add_modifier", {"object": "a", "type": "array", "count": 64})
        with pytest.raises(BlenderRefused, match="too much geometry"):
            s.call("add_modifier", {"object": "a", "type": "array", "count": 8})
        objects = s.call("query_scene")["objects"]
        assert [o["modifiers"] for o in objects if o["name"] == "a"] == [[{"type": "array", "name": "array"}]]
