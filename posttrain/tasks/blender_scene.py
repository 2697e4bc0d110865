"""`blender_scene`: build a described 3D scene in a real Blender (bpy 5.0.1) through tool calls.

The Blender-free, fast variant is `scene` (posttrain's own scene-graph API, `scene_api.py`);
this domain drives real bpy in a sandbox (`blender_tools.py`, `blender_session.py`).

A task describes objects by world-space size and position, most of them relative to
another: "on top of" (resting on its top face, centred over it), "left of" (a gap along
-x, on the floor, same y), "inside" (centred within a box). Difficulty (0..3) sets the
object count (2 + difficulty), whether roughness/metallic matter (>= 1), a key light (>= 1),
a row of copies made with an array modifier (>= 2), a box with a hole cut by a boolean
(>= 2) and a camera (>= 3). The oracle is the tool-call chain that builds it and saves.
The verifier (`blender_scene_match`, inside `step_efficiency`) replays the calls in a
fresh Blender, inspects the saved file in another fresh one, and scores geometry.
"""

from __future__ import annotations

import math
import random
from typing import Any

from posttrain.errors import ConfigError
from posttrain.registry import domain, registry
from posttrain.tasks.blender_runtime import missing_reason
from posttrain.tasks.blender_tools import BLENDER_TOOLS
from posttrain.tasks.plan import dump_plan, parse_plan
from posttrain.types import Environment, Limits, Message, Spec, Task

NAMES = ["table", "crate", "lamp", "ball", "vase", "pillar", "stool", "block", "drum", "gem", "shelf", "cone"]
COLORS = {"red": [0.8, 0.1, 0.1], "green": [0.1, 0.6, 0.2], "blue": [0.1, 0.2, 0.8], "white": [0.9, 0.9, 0.9],
          "black": [0.05, 0.05, 0.05], "yellow": [0.9, 0.8, 0.1], "orange": [0.9, 0.45, 0.1], "grey": [0.5, 0.5, 0.5]}
SHAPE_WORDS = {"cube": "box", "uv_sphere": "sphere", "cylinder": "cylinder"}
SYSTEM = ("You build 3D scenes in Blender with the blender_* tools. Units are metres; z is up; the floor is z=0; "
          "'left' is -x. Primitives are centred on their location: a cube has edge 2 and a sphere or cylinder radius 1 "
          "and depth 2, so scale = size / 2 per axis. Give every object its material, then call blender_save.")


def _r(x: float) -> float:
    return round(x, 3)


def _size(rng: random.Random, shape: str, big: bool) -> list[float]:
    lo, hi = (0.8, 2.0) if big else (0.2, 0.6)
    if shape == "uv_sphere":
        d = _r(rng.uniform(lo, hi))
        return [d, d, d]
    if shape == "cylinder":
        d = _r(rng.uniform(lo, hi))
        return [d, d, _r(rng.uniform(lo, hi * 1.5))]
    return [_r(rng.uniform(lo, hi)) for _ in range(3)]


def _place(rng: random.Random, placed: list[dict], size: list[float], row: bool, used: set) -> tuple[list[float], dict, str]:
    """A centre for a new object (a row: its first copy), the relation it satisfies, and the words that say it.

    `used` holds (kind, name) already taken: one object on top of each, one inside each, so none overlap."""
    boxes = [p for p in placed if p["shape"] == "cube" and not p.get("hole") and min(p["size"]) > max(size) + 0.2
             and ("inside", p["name"]) not in used]
    tops = [p for p in placed if ("on_top_of", p["name"]) not in used]
    if row:  # a row grows along +x: it stands to the right of its reference
        ref, gap = max(placed, key=lambda p: p["center"][0] + p["size"][0] / 2), _r(rng.choice([0.5, 1.0]))  # rightmost: free side
        x = _r(ref["center"][0] + ref["size"][0] / 2 + gap + size[0] / 2)
        return [x, ref["center"][1], _r(size[2] / 2)], {"kind": "right_of", "of": ref["name"], "gap": gap}, \
            f"standing on the floor {gap} m to the right of '{ref['name']}' (gap along x), aligned with its centre in y"
    kinds = ["left_of"] + (["on_top_of"] if tops else []) + (["inside"] if boxes else [])
    kind = rng.choice(kinds)
    if kind == "left_of":  # of the leftmost object: nothing stands on its left yet
        ref = min(placed, key=lambda p: p["center"][0] - p["size"][0] / 2)
    else:
        ref = rng.choice(boxes if kind == "inside" else tops)
    used.add((kind, ref["name"]))
    c, s = ref["center"], ref["size"]
    if kind == "on_top_of":
        return [c[0], c[1], _r(c[2] + s[2] / 2 + size[2] / 2)], {"kind": kind, "of": ref["name"]}, f"resting on top of '{ref['name']}', centred over it"
    if kind == "inside":
        return list(c), {"kind": kind, "of": ref["name"]}, f"inside '{ref['name']}', at its centre"
    gap = _r(rng.choice([0.25, 0.5, 1.0]))
    x = _r(c[0] - s[0] / 2 - gap - size[0] / 2)
    return [x, c[1], _r(size[2] / 2)], {"kind": kind, "of": ref["name"], "gap": gap}, \
        f"standing on the floor {gap} m to the left of '{ref['name']}' (gap between them along x), aligned with its centre in y"


def _material(rng: random.Random, name: str, rich: bool) -> tuple[dict, str]:
    color = rng.choice(sorted(COLORS))
    mat = {"name": f"{name}_mat", "color": COLORS[color], "roughness": 0.5, "metallic": 0.0}
    words = f"material '{mat['name']}' of colour {color} {COLORS[color]}"
    if rich:
        mat.update(roughness=rng.choice([0.1, 0.3, 0.8]), metallic=rng.choice([0.0, 1.0]))
        words += f", roughness {mat['roughness']}, metallic {mat['metallic']}"
    return mat, words


def _object_calls(obj: dict) -> list[dict]:
    m = obj["material"]
    calls = [{"tool": "blender_add_primitive", "arguments": {"name": obj["name"], "shape": obj["shape"], "location": obj["center"],
                                                            "scale": [_r(v / 2) for v in obj["size"]]}},
             {"tool": "blender_add_material", "arguments": {"name": m["name"], "color": m["color"], "roughness": m["roughness"],
                                                           "metallic": m["metallic"]}},
             {"tool": "blender_assign_material", "arguments": {"object": obj["name"], "material": m["name"]}}]
    if obj.get("array"):
        a = obj["array"]
        calls.append({"tool": "blender_add_modifier", "arguments": {"object": obj["name"], "type": "array", "count": a["count"],
                                                                   "relative_offset": [a["step"], 0.0, 0.0]}})
    if obj.get("hole"):
        cut = f"{obj['name']}_cutter"
        r = obj["hole"]["radius"]
        calls.append({"tool": "blender_add_primitive", "arguments": {"name": cut, "shape": "cylinder", "location": obj["center"],
                                                                    "scale": [r, r, obj["size"][2]]}})
        calls.append({"tool": "blender_add_modifier", "arguments": {"object": obj["name"], "type": "boolean", "target": cut,
                                                                   "operation": "difference"}})
    return calls


def _object(rng: random.Random, i: int, n: int, name: str, placed: list[dict], d: float, used: set) -> tuple[dict, str]:
    special = "hole" if d >= 2 and i == 0 else "array" if d >= 2 and i == n - 1 else None
    shape = "cube" if special else rng.choice(sorted(SHAPE_WORDS))
    size = _size(rng, shape, big=i == 0 or special == "hole")
    mat, mat_words = _material(rng, name, rich=d >= 1)
    obj: dict[str, Any] = {"name": name, "shape": shape, "size": size, "material": mat}
    dims = " x ".join(f"{v:g}" for v in size)
    if shape == "uv_sphere":
        desc = f"a sphere named '{name}' of diameter {size[0]:g}"
    elif shape == "cylinder":
        desc = f"an upright cylinder named '{name}' of diameter {size[0]:g} and height {size[2]:g}"
    else:
        desc = f"a box named '{name}' of size {dims} (x by y by z)"
    if special == "array":
        count, step = rng.randint(3, 5), rng.choice([1.5, 2.0])
        obj["array"] = {"count": count, "step": step}
        desc = (f"a row of {count} boxes made with ONE object named '{name}' and an array modifier: each box {dims}, "
                f"copies along +x every {step} box widths (relative offset [{step}, 0, 0]); the first box")
    if special == "hole":
        r = _r(min(size[0], size[1]) * rng.choice([0.2, 0.3]))
        obj["hole"] = {"radius": r}
        desc += f", with a round vertical hole of radius {r:g} through its centre cut by a boolean difference with a cylinder named '{name}_cutter'"
    if not placed:
        center = [_r(rng.uniform(-2, 2)), _r(rng.uniform(-2, 2)), _r(size[2] / 2)]
        rel, where = None, f"standing on the floor centred at x={center[0]:g}, y={center[1]:g}"
    else:
        center, rel, where = _place(rng, placed, size, row=special == "array", used=used)
    obj.update(center=center, relation=rel)
    return obj, f"- {desc}, {where}; {mat_words}."


def _extras(rng: random.Random, d: float, base: dict) -> tuple[dict, list[str], list[dict]]:
    extras, words, calls = {}, [], []
    if d >= 1:
        loc = [_r(base["center"][0] + rng.choice([-3.0, 3.0])), _r(base["center"][1] - 3.0), 5.0]
        energy = float(rng.choice([500, 1000, 1500]))
        extras["light"] = {"name": "key", "type": "point", "location": loc, "energy": energy}
        words.append(f"- a point light named 'key' at {loc} with energy {energy:g} W.")
        calls.append({"tool": "blender_add_light", "arguments": {"name": "key", "type": "point", "location": loc, "energy": energy}})
    if d >= 3:
        loc = [_r(base["center"][0]), _r(base["center"][1] - 8.0), 4.0]
        extras["camera"] = {"location": loc, "look_at": base["center"]}
        words.append(f"- the camera at {loc} looking at the centre of '{base['name']}' {base['center']}.")
        calls.append({"tool": "blender_set_camera", "arguments": {"location": loc, "look_at": base["center"]}})
    return extras, words, calls


def scene_spec(rng: random.Random, d: float) -> tuple[dict, str, list[dict]]:
    """(spec the verifier checks, the prompt's description, the oracle's calls)."""
    names = rng.sample(NAMES, 2 + round(d))
    placed: list[dict] = []
    lines: list[str] = []
    used: set[tuple[str, str]] = set()
    for i, name in enumerate(names):
        obj, words = _object(rng, i, len(names), name, placed, d, used)
        placed.append(obj)
        lines.append(words)
    extras, extra_words, extra_calls = _extras(rng, d, placed[0])
    calls = [c for obj in placed for c in _object_calls(obj)] + extra_calls + [{"tool": "blender_save", "arguments": {}}]
    return {"objects": placed, **extras}, "\n".join(lines + extra_words), calls


@domain("blender_scene")
class BlenderSceneDomain:
    name = "blender_scene"

    def __init__(self, max_new_tokens: int = 256) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"blender_scene:{seed}:{difficulty}")
        d = float(max(0, min(3, round(difficulty))))
        tasks = []
        for i in range(n):
            spec, words, calls = scene_spec(rng, d)
            steps = calls + [{"answer": "done"}]
            ref = len(steps)
            tasks.append(Task(
                id=f"blender_scene-{seed}-{i}", domain=self.name,
                prompt=(Message("system", SYSTEM), Message("user", "Build this scene in Blender:\n" + words)),
                verifier=Spec("step_efficiency", {"inner": {"name": "blender_scene_match"}, "floor": 0.5}),
                difficulty=d, environment=Environment(tools=BLENDER_TOOLS),
                limits=Limits(max_steps=2 * ref, max_new_tokens=self.max_new_tokens, timeout_s=300.0),
                metadata={"target": spec, "reference_steps": ref},
                oracle=dump_plan(steps),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        """A plausible miss: one object dropped, one shifted by 0.5 m, or never saved."""
        steps = parse_plan(task.oracle or "")
        kind = rng.choice(["drop_object", "shift", "no_save"])
        if kind == "no_save":
            return dump_plan([s for s in steps if s.get("tool") != "blender_save"])
        adds = [s for s in steps if s.get("tool") == "blender_add_primitive" and not s["arguments"]["name"].endswith("_cutter")]
        victim = rng.choice(adds)
        if kind == "shift":
            loc = victim["arguments"]["location"]
            victim["arguments"]["location"] = [loc[0] + 0.5, loc[1], loc[2]]
            return dump_plan(steps)
        name = victim["arguments"]["name"]
        return dump_plan([s for s in steps if name not in (s.get("arguments", {}).get("name"), s.get("arguments", {}).get("object"))])


def refuse_without_runtime(name: str = "blender_scene", args: Any = None, levels: Any = None,
                           key: str = "tasks.domains.blender_scene") -> None:
    """Config load (registered as this domain's `domain_check`, config_check._check_tasks): the domain
    needs the bpy runtime; say how to build it."""
    why = missing_reason()
    if why is not None:
        raise ConfigError(f"{key}: {why}")


registry("domain_check").register("blender_scene")(refuse_without_runtime)


def expected_bounds(obj: dict) -> tuple[list[float], list[float]]:
    """World-space AABB (min, max) of the finished object; a row spans all its copies along +x."""
    lo = [c - s / 2 for c, s in zip(obj["center"], obj["size"])]
    hi = [c + s / 2 for c, s in zip(obj["center"], obj["size"])]
    if obj.get("array"):
        a = obj["array"]
        hi[0] = lo[0] + obj["size"][0] * (1 + a["step"] * (a["count"] - 1))
    return lo, hi


# Volume / bounding-box volume of the primitives as the worker builds them, measured in bpy 5.0.1
# (a 48x24 UV sphere and a 64-gon cylinder are 0.7 % and 0.2 % under pi/6 and pi/4). Checking
# volume tells shapes apart that share their bounds: a cube where a sphere was asked fails.
FILL = {"cube": 1.0, "uv_sphere": 0.5199, "cylinder": 0.7841}


def expected_volume(obj: dict) -> float:
    """Volume of the finished object: its fill of the box; rows count copies; holes lose a 64-gon prism."""
    sx, sy, sz = obj["size"]
    if obj.get("array"):
        return obj["array"]["count"] * sx * sy * sz
    if obj.get("hole"):
        r = obj["hole"]["radius"]
        return sx * sy * sz - 0.5 * 64 * r * r * math.sin(2 * math.pi / 64) * sz
    return FILL[obj["shape"]] * sx * sy * sz


def hack_plans(task: Task) -> dict[str, str]:
    """Hostile tool-call chains that must score 0: what a reward hacker would try first."""
    from posttrain.types import thaw

    objs = thaw(task.metadata["target"])["objects"]
    save = {"tool": "blender_save", "arguments": {}}
    named: list[dict] = []  # every object by its right name, shape and material, left at the origin at default size
    for o in objs:
        m = o["material"]
        named += [{"tool": "blender_add_primitive", "arguments": {"name": o["name"], "shape": o["shape"]}},
                  {"tool": "blender_add_material", "arguments": {"name": m["name"], "color": m["color"],
                                                                "roughness": m["roughness"], "metallic": m["metallic"]}},
                  {"tool": "blender_assign_material", "arguments": {"object": o["name"], "material": m["name"]}}]
    first = objs[0]
    huge = [{"tool": "blender_add_primitive", "arguments": {"name": first["name"], "shape": "cube", "scale": [50.0, 50.0, 50.0]}},
            {"tool": "blender_add_material", "arguments": {"name": first["material"]["name"], "color": first["material"]["color"]}},
            {"tool": "blender_assign_material", "arguments": {"object": first["name"], "material": first["material"]["name"]}}]
    return {"empty_scene": dump_plan([save, {"answer": "done"}]),
            "names_without_placement": dump_plan(named + [save, {"answer": "done"}]),
            "one_huge_object": dump_plan(huge + [save, {"answer": "done"}])}


CUSTOM_PROPERTY_PROBE = r'''
import json, sys
import bpy
target = json.loads(sys.argv[-2])
bpy.ops.wm.read_factory_settings(use_empty=True)
for o in target["objects"]:
    bpy.ops.mesh.primitive_cube_add(size=2.0)
    ob = bpy.context.active_object
    ob.name = o["name"]
    for key in ("center", "size", "material", "relation", "array", "hole"):  # the answer, written where it is not geometry
        if o.get(key) is not None:
            ob[key] = json.dumps(o[key])
    ob["location"], ob["dimensions"] = o["center"], o["size"]
bpy.ops.wm.save_as_mainfile(filepath=sys.argv[-1])
'''


def custom_property_probe_cmd(python: str, target: dict, out_path: str) -> list[str]:
    """argv that writes a .blend whose objects carry the expected values only as custom properties."""
    import json

    from posttrain.types import thaw

    return [python, "-c", CUSTOM_PROPERTY_PROBE, json.dumps(thaw(target)), out_path]
