import asyncio

import pytest

from posttrain.tasks.scene_api import SceneGraph
from posttrain.tasks.tools_impl import ToolError, call_tool, tool_schema


def run(name, args, state=None):
    return asyncio.run(call_tool(name, args, state if state is not None else {"tables": {"t": {"k": "42"}}, "scene": SceneGraph()}))


def test_calculator_evaluates_and_refuses_code():
    assert run("calculator", {"expression": "2*(3+4) - sqrt(16)"}) == "10"
    with pytest.raises(ToolError, match="unsupported"):
        run("calculator", {"expression": "__import__('os').system('id')"})
    with pytest.raises(ToolError, match="exponent too large"):
        run("calculator", {"expression": "9**9**9"})


def test_arguments_are_validated_against_the_schema():
    with pytest.raises(ToolError, match="bad argument"):
        run("convert", {"value": "ten", "from_unit": "km", "to_unit": "m"})
    with pytest.raises(ToolError, match="unknown tool"):
        run("rm_rf", {})


def test_converter_and_lookup():
    assert run("convert", {"value": 212, "from_unit": "F", "to_unit": "C"}) == "100"
    assert run("convert", {"value": 1, "from_unit": "mi", "to_unit": "km"}) == "1.609344"
    with pytest.raises(ToolError, match="cannot convert mass"):
        run("convert", {"value": 1, "from_unit": "kg", "to_unit": "m"})
    assert run("lookup", {"table": "t", "key": "k"}) == "42"


def test_scene_rejects_parent_cycles_and_keeps_state():
    state = {"scene": SceneGraph()}
    run("scene_add_object", {"id": "a", "shape": "box"}, state)
    run("scene_add_object", {"id": "b", "shape": "sphere"}, state)
    run("scene_set_parent", {"id": "b", "parent": "a"}, state)
    with pytest.raises(ToolError, match="cycle"):
        run("scene_set_parent", {"id": "a", "parent": "b"}, state)
    assert state["scene"].objects["a"].parent is None


def test_every_tool_has_a_json_schema():
    names = ["calculator", "lookup", "convert", "shell", "scene_add_object", "scene_set_transform",
             "scene_set_material", "scene_set_parent", "scene_remove_object", "scene_get"]
    for name in names:
        schema = tool_schema(name)["function"]["parameters"]
        assert schema["type"] == "object"
