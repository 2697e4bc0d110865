"""The Blender tools: a small stable surface over bpy, in posttrain's tool-call format.

Each tool validates its arguments on the host (the JSON Schema below, then finiteness and
ranges no schema states), then sends one request to the episode's `BlenderSession`
(`state["blender"]`, started by the first Blender call: `import bpy` is paid once per
episode). A refusal from the scene (unknown object, name taken, parent cycle) raises
`ToolError`: the model sees it as the observation. A dead or hung Blender raises
`SandboxError`: the episode is an infrastructure error, not the model's.

Units are Blender's: metres, rotations in degrees (XYZ Euler), colours RGB in 0..1.
Primitives are Blender's defaults (cube edge 2, sphere/cylinder/cone radius 1, depth 2,
centred on the location), so a size is set with scale. `blender_save` keeps the saved
file's bytes in `state["blender_saved"]`: the verifier inspects the last save.
"""

from __future__ import annotations

import math
from typing import Any

from posttrain.errors import SandboxError
from posttrain.tasks.tool_base import ToolError, tool_fn

NAME = {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_]{0,31}$"}
VEC = {"type": "array", "items": {"type": "number", "minimum": -1000, "maximum": 1000}, "minItems": 3, "maxItems": 3}
POS_VEC = {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000}, "minItems": 3, "maxItems": 3}
UNIT = {"type": "number", "minimum": 0, "maximum": 1}
RGB = {"type": "array", "items": UNIT, "minItems": 3, "maxItems": 3}
SHAPES = ("cube", "uv_sphere", "cylinder", "cone", "plane", "torus")
MODIFIERS = ("bevel", "array", "boolean", "mirror")


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _finite(value: Any, where: str) -> None:
    if isinstance(value, list):
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{where} must be a finite number")


def session_of(state: dict[str, Any]) -> Any:
    """The episode's Blender session, started on first use."""
    from posttrain.tasks.blender_session import BlenderDown, BlenderSession

    if state.get("blender") is None:
        try:
            state["blender"] = BlenderSession()
        except BlenderDown as e:
            raise SandboxError(str(e)) from None
    return state["blender"]


def _call(state: dict[str, Any], op: str, args: dict[str, Any]) -> Any:
    from posttrain.tasks.blender_session import BlenderDown, BlenderRefused

    for key, value in args.items():
        _finite(value, key)
    try:
        return session_of(state).call(op, {k: v for k, v in args.items() if v is not None})
    except BlenderRefused as e:
        raise ToolError(f"blender_{op}: {e}") from None
    except BlenderDown as e:
        state["blender"] = None
        raise SandboxError(str(e)) from None


@tool_fn("blender_add_primitive", "Add a mesh primitive (cube edge 2, sphere/cylinder/cone radius 1 and depth 2, plane, torus) "
         "named `name`, centred at `location`, rotation in degrees, scale per axis.",
         _schema({"name": NAME, "shape": {"type": "string", "enum": list(SHAPES)}, "location": VEC, "rotation": VEC,
                  "scale": POS_VEC}, ["name", "shape"]))
def blender_add_primitive(state: dict[str, Any], name: str, shape: str, location: Any = None, rotation: Any = None,
                          scale: Any = None) -> str:
    return _call(state, "add_primitive", {"name": name, "shape": shape, "location": location, "rotation": rotation, "scale": scale})


@tool_fn("blender_set_transform", "Set an object's location, rotation (degrees) and/or scale, each [x, y, z].",
         _schema({"name": NAME, "location": VEC, "rotation": VEC, "scale": POS_VEC}, ["name"]))
def blender_set_transform(state: dict[str, Any], name: str, location: Any = None, rotation: Any = None, scale: Any = None) -> str:
    if location is None and rotation is None and scale is None:
        raise ToolError("blender_set_transform: give at least one of location, rotation, scale")
    return _call(state, "set_transform", {"name": name, "location": location, "rotation": rotation, "scale": scale})


@tool_fn("blender_parent", "Parent `child` under `parent` (null detaches); the child keeps its world transform.",
         _schema({"child": NAME, "parent": {"anyOf": [NAME, {"type": "null"}]}}, ["child", "parent"]))
def blender_parent(state: dict[str, Any], child: str, parent: str | None) -> str:
    return _call(state, "parent", {"child": child, "parent": parent})


@tool_fn("blender_add_material", "Create a Principled BSDF material: base colour RGB 0..1, roughness, metallic.",
         _schema({"name": NAME, "color": RGB, "roughness": UNIT, "metallic": UNIT}, ["name", "color"]))
def blender_add_material(state: dict[str, Any], name: str, color: Any, roughness: float | None = None,
                         metallic: float | None = None) -> str:
    return _call(state, "add_material", {"name": name, "color": color, "roughness": roughness, "metallic": metallic})


@tool_fn("blender_assign_material", "Give mesh `object` the material `material` (replacing its materials).",
         _schema({"object": NAME, "material": NAME}, ["object", "material"]))
def blender_assign_material(state: dict[str, Any], object: str, material: str) -> str:  # noqa: A002  the tool's argument name
    return _call(state, "assign_material", {"object": object, "material": material})


@tool_fn("blender_add_modifier", "Add a modifier to a mesh: bevel (width, segments), array (count, relative_offset [x,y,z] "
         "in object sizes), boolean (target, operation difference/union/intersect; the target is hidden), mirror (axis).",
         _schema({"object": NAME, "type": {"type": "string", "enum": list(MODIFIERS)},
                  "width": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
                  "segments": {"type": "integer", "minimum": 1, "maximum": 16},
                  "count": {"type": "integer", "minimum": 1, "maximum": 64},
                  "relative_offset": {**VEC, "items": {"type": "number", "minimum": -10, "maximum": 10}},
                  "target": NAME, "operation": {"type": "string", "enum": ["difference", "union", "intersect"]},
                  "axis": {"type": "string", "enum": ["x", "y", "z"]}}, ["object", "type"]))
def blender_add_modifier(state: dict[str, Any], object: str, type: str, **params: Any) -> str:  # noqa: A002
    allowed = {"bevel": {"width", "segments"}, "array": {"count", "relative_offset"}, "boolean": {"target", "operation"},
               "mirror": {"axis"}}[type]
    stray = sorted(set(params) - allowed)
    if stray:
        raise ToolError(f"blender_add_modifier: {', '.join(stray)} do not apply to a {type} modifier (it takes {', '.join(sorted(allowed))})")
    if type == "boolean" and "target" not in params:
        raise ToolError("blender_add_modifier: a boolean modifier needs 'target'")
    return _call(state, "add_modifier", {"object": object, "type": type, **params})


@tool_fn("blender_set_camera", "Place the scene camera at `location` looking at `look_at`; `lens` in mm.",
         _schema({"location": VEC, "look_at": VEC, "lens": {"type": "number", "minimum": 5, "maximum": 300}}, ["location", "look_at"]))
def blender_set_camera(state: dict[str, Any], location: Any, look_at: Any, lens: float | None = None) -> str:
    return _call(state, "set_camera", {"location": location, "look_at": look_at, "lens": lens})


@tool_fn("blender_add_light", "Add a light (point, sun, spot, area) at `location` with energy (W) and colour.",
         _schema({"name": NAME, "type": {"type": "string", "enum": ["point", "sun", "spot", "area"]}, "location": VEC,
                  "energy": {"type": "number", "minimum": 0, "maximum": 100000}, "color": RGB}, ["name", "type", "location"]))
def blender_add_light(state: dict[str, Any], name: str, type: str, location: Any, energy: float | None = None,  # noqa: A002
                      color: Any = None) -> str:
    return _call(state, "add_light", {"name": name, "type": type, "location": location, "energy": energy, "color": color})


@tool_fn("blender_delete", "Delete an object.", _schema({"name": NAME}, ["name"]))
def blender_delete(state: dict[str, Any], name: str) -> str:
    return _call(state, "delete", {"name": name})


@tool_fn("blender_query_scene", "List the scene's objects: type, world location, rotation, scale, dimensions, parent, "
         "materials, modifiers.", _schema({}, []))
def blender_query_scene(state: dict[str, Any]) -> str:
    import json

    return json.dumps(_call(state, "query_scene", {}), sort_keys=True)


@tool_fn("blender_save", "Save the scene to scene.blend (the saved file is what gets checked).", _schema({}, []))
def blender_save(state: dict[str, Any]) -> str:
    out = _call(state, "save", {})
    state["blender_saved"] = (state["blender"].workspace / "scene.blend").read_bytes()
    return out


BLENDER_TOOLS = ("blender_add_primitive", "blender_set_transform", "blender_parent", "blender_add_material",
                 "blender_assign_material", "blender_add_modifier", "blender_set_camera", "blender_add_light",
                 "blender_delete", "blender_query_scene", "blender_save")

# The first Blender call of an episode starts the process (1.5-4 s, longer with many starting at
# once): the agent's default 10 s tool timeout would charge a slow start to the model.
for _fn in (blender_add_primitive, blender_set_transform, blender_parent, blender_add_material, blender_assign_material,
            blender_add_modifier, blender_set_camera, blender_add_light, blender_delete, blender_query_scene, blender_save):
    _fn.timeout_s = 60.0
