"""A small 3D scene-graph API driven by tool calls, and the comparison the verifier uses.

Objects have an id, a shape (box, sphere, cylinder, cone, plane), a local transform
(position xyz, rotation xyz in degrees, scale xyz), a material (rgb colour in [0, 1],
roughness, metallic) and an optional parent. Tools: `scene_add_object`,
`scene_set_transform`, `scene_set_material`, `scene_set_parent`, `scene_remove_object`.
A bad call (unknown id, duplicate id, parent cycle, wrong types) raises `ToolError` and
leaves the scene unchanged.

Does not model geometry beyond these parameters (no meshes, no world-space resolution:
parameters are compared as given, in the parent's frame).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

from posttrain.tasks.tool_base import ToolError, tool_fn

SHAPES = ("box", "sphere", "cylinder", "cone", "plane")
VEC = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
ID = {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_]{0,31}$"}


@dataclass(frozen=True)
class SceneObject:
    shape: str
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    color: tuple[float, float, float] = (0.8, 0.8, 0.8)
    roughness: float = 0.5
    metallic: float = 0.0
    parent: str | None = None


@dataclass
class SceneGraph:
    objects: dict[str, SceneObject] = field(default_factory=dict)

    def get(self, oid: str) -> SceneObject:
        if oid not in self.objects:
            raise ToolError(f"no object {oid!r} in the scene")
        return self.objects[oid]

    def add(self, oid: str, shape: str) -> None:
        if oid in self.objects:
            raise ToolError(f"object {oid!r} already exists")
        if shape not in SHAPES:
            raise ToolError(f"unknown shape {shape!r} (shapes: {', '.join(SHAPES)})")
        self.objects[oid] = SceneObject(shape)

    def update(self, oid: str, **changes: Any) -> None:
        self.objects[oid] = replace(self.get(oid), **changes)

    def set_parent(self, oid: str, parent: str | None) -> None:
        self.get(oid)
        p = parent
        while p is not None:  # walk up: a cycle would make oid its own ancestor
            if p == oid:
                raise ToolError(f"parenting {oid!r} under {parent!r} makes a cycle")
            p = self.get(p).parent
        self.update(oid, parent=parent)

    def remove(self, oid: str) -> None:
        self.get(oid)
        if any(o.parent == oid for o in self.objects.values()):
            raise ToolError(f"object {oid!r} has children; remove or re-parent them first")
        del self.objects[oid]

    def to_json(self) -> dict[str, Any]:
        return {k: asdict(v) for k, v in sorted(self.objects.items())}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SceneGraph":
        objs = {}
        for k, v in data.items():
            v = dict(v)
            for key in ("position", "rotation", "scale", "color"):
                if key in v:
                    v[key] = tuple(float(x) for x in v[key])
            objs[k] = SceneObject(**v)
        return cls(objs)


def _vec(v: Any) -> tuple[float, float, float]:
    return tuple(float(x) for x in v)  # type: ignore[return-value]


@tool_fn("scene_add_object", "Add an object with a unique id and a shape (box, sphere, cylinder, cone, plane).",
         {"type": "object", "properties": {"id": ID, "shape": {"type": "string", "enum": list(SHAPES)}}, "required": ["id", "shape"], "additionalProperties": False})
def scene_add_object(state: dict[str, Any], id: str, shape: str) -> str:
    state["scene"].add(id, shape)
    return f"added {id}"


@tool_fn("scene_set_transform", "Set an object's position, rotation (degrees) and/or scale, each [x, y, z].",
         {"type": "object", "properties": {"id": ID, "position": VEC, "rotation": VEC, "scale": VEC}, "required": ["id"], "additionalProperties": False})
def scene_set_transform(state: dict[str, Any], id: str, position: Any = None, rotation: Any = None, scale: Any = None) -> str:
    changes = {k: _vec(v) for k, v in (("position", position), ("rotation", rotation), ("scale", scale)) if v is not None}
    if not changes:
        raise ToolError("scene_set_transform: give at least one of position, rotation, scale")
    if "scale" in changes and any(s <= 0 for s in changes["scale"]):
        raise ToolError("scene_set_transform: scale components must be > 0")
    state["scene"].update(id, **changes)
    return f"transformed {id}"


@tool_fn("scene_set_material", "Set an object's colour [r, g, b] in 0..1, roughness and metallic in 0..1.",
         {"type": "object", "properties": {"id": ID, "color": {**VEC, "items": {"type": "number", "minimum": 0, "maximum": 1}},
          "roughness": {"type": "number", "minimum": 0, "maximum": 1}, "metallic": {"type": "number", "minimum": 0, "maximum": 1}},
          "required": ["id"], "additionalProperties": False})
def scene_set_material(state: dict[str, Any], id: str, color: Any = None, roughness: float | None = None, metallic: float | None = None) -> str:
    changes: dict[str, Any] = {}
    if color is not None:
        changes["color"] = _vec(color)
    if roughness is not None:
        changes["roughness"] = float(roughness)
    if metallic is not None:
        changes["metallic"] = float(metallic)
    if not changes:
        raise ToolError("scene_set_material: give at least one of color, roughness, metallic")
    state["scene"].update(id, **changes)
    return f"material set on {id}"


@tool_fn("scene_set_parent", "Attach an object under a parent (or detach with parent null).",
         {"type": "object", "properties": {"id": ID, "parent": {"anyOf": [ID, {"type": "null"}]}}, "required": ["id", "parent"], "additionalProperties": False})
def scene_set_parent(state: dict[str, Any], id: str, parent: str | None) -> str:
    state["scene"].set_parent(id, parent)
    return f"{id} parented to {parent}"


@tool_fn("scene_remove_object", "Remove an object that has no children.",
         {"type": "object", "properties": {"id": ID}, "required": ["id"], "additionalProperties": False})
def scene_remove_object(state: dict[str, Any], id: str) -> str:
    state["scene"].remove(id)
    return f"removed {id}"


@tool_fn("scene_get", "Return the current scene graph as JSON.", {"type": "object", "properties": {}, "additionalProperties": False})
def scene_get(state: dict[str, Any]) -> str:
    return json.dumps(state["scene"].to_json(), sort_keys=True)


def compare_scenes(target: SceneGraph, got: SceneGraph, tol: float = 1e-3, angle_tol: float = 0.5) -> dict[str, Any]:
    """Per-parameter agreement: `matched / (checked + extra objects)` and what differed."""
    checked = matched = 0
    wrong: list[str] = []
    for oid, t in target.objects.items():
        g = got.objects.get(oid)
        for key in ("shape", "position", "rotation", "scale", "color", "roughness", "metallic", "parent"):
            checked += 1
            tv = getattr(t, key)
            gv = getattr(g, key) if g is not None else None
            if g is not None and _close(tv, gv, angle_tol if key == "rotation" else tol):
                matched += 1
            else:
                wrong.append(f"{oid}.{key}")
    extra = sorted(set(got.objects) - set(target.objects))
    frac = matched / (checked + len(extra)) if checked else float(not extra)
    return {"fraction": frac, "checked": checked, "matched": matched, "mismatched": wrong[:20], "extra_objects": extra}


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(math.isclose(x, y, abs_tol=tol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return math.isclose(a, b, abs_tol=tol)
    return a == b
