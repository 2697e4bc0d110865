"""`scene`: build a 3D scene through tool calls on the scene-graph API (`scene_api.py`).

The fast, Blender-free variant: posttrain's own small API, verified in-process. The same
kind of task in a real modelling tool is `blender_scene` (bpy in a sandbox, docs/scene.md).

The prompt describes a target scene object by object (shape, position, rotation,
scale, named colour, roughness/metallic, parent). Difficulty (0..3) sets the object
count (2 + 2*difficulty) and how many parameters depart from the defaults. The oracle
plan issues the minimal calls; the verifier (`step_efficiency(scene_match)`) compares
the rebuilt scene with `metadata.target_scene` and charges each wrong call.
"""

from __future__ import annotations

import random

from posttrain.registry import domain
from posttrain.tasks.plan import dump_plan, parse_plan
from posttrain.tasks.scene_api import SHAPES, SceneGraph, SceneObject
from posttrain.types import Environment, Limits, Message, Spec, Task

COLORS = {"red": (1.0, 0.0, 0.0), "green": (0.0, 1.0, 0.0), "blue": (0.0, 0.0, 1.0), "white": (1.0, 1.0, 1.0),
          "black": (0.0, 0.0, 0.0), "yellow": (1.0, 1.0, 0.0), "orange": (1.0, 0.5, 0.0), "grey": (0.5, 0.5, 0.5)}
NAMES = ["table", "lamp", "vase", "chair", "shelf", "crate", "ball", "post", "roof", "base", "arm", "cap"]
TOOLS = ("scene_add_object", "scene_set_transform", "scene_set_material", "scene_set_parent", "scene_remove_object", "scene_get")


def _vec(rng: random.Random, lo: float, hi: float, step: float) -> tuple[float, float, float]:
    n = int((hi - lo) / step)
    return tuple(lo + step * rng.randrange(n + 1) for _ in range(3))  # type: ignore[return-value]


def _object(rng: random.Random, oid: str, parent: str | None, rich: bool) -> tuple[SceneObject, str, list[dict]]:
    shape = rng.choice(SHAPES)
    color_name = rng.choice(sorted(COLORS))
    obj = SceneObject(shape=shape, position=_vec(rng, -4, 4, 0.5), color=COLORS[color_name], parent=parent,
                      rotation=_vec(rng, 0, 90, 15) if rich else (0.0, 0.0, 0.0),
                      scale=_vec(rng, 0.5, 3, 0.5) if rich else (1.0, 1.0, 1.0),
                      roughness=rng.choice([0.1, 0.3, 0.5, 0.9]) if rich else 0.5,
                      metallic=rng.choice([0.0, 1.0]) if rich else 0.0)
    words = [f"a {color_name} {shape} named '{oid}' at position {list(obj.position)}"]
    calls: list[dict] = [{"tool": "scene_add_object", "arguments": {"id": oid, "shape": shape}}]
    tr: dict = {"id": oid, "position": list(obj.position)}
    if rich:
        words.append(f"rotation {list(obj.rotation)} degrees, scale {list(obj.scale)}, roughness {obj.roughness}, metallic {obj.metallic}")
        tr.update(rotation=list(obj.rotation), scale=list(obj.scale))
    calls.append({"tool": "scene_set_transform", "arguments": tr})
    mat: dict = {"id": oid, "color": list(obj.color)}
    if rich:
        mat.update(roughness=obj.roughness, metallic=obj.metallic)
    calls.append({"tool": "scene_set_material", "arguments": mat})
    if parent:
        words.append(f"attached under '{parent}'")
        calls.append({"tool": "scene_set_parent", "arguments": {"id": oid, "parent": parent}})
    return obj, "; ".join(words), calls


@domain("scene")
class SceneDomain:
    name = "scene"

    def __init__(self, max_new_tokens: int = 256) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"scene:{seed}:{difficulty}")
        d = max(0.0, min(difficulty, 3.0))
        tasks = []
        for i in range(n):
            ids = rng.sample(NAMES, 2 + round(2 * d))
            scene, lines, steps = SceneGraph(), [], []
            for j, oid in enumerate(ids):
                parent = rng.choice(ids[:j]) if j and rng.random() < 0.4 else None
                obj, words, calls = _object(rng, oid, parent, rich=rng.random() < d / 3)
                scene.objects[oid] = obj
                lines.append(f"- {words}")
                steps.extend(calls)
            steps.append({"answer": "done"})
            ref = len(steps)
            prompt = ("Build this scene with the scene tools (colours are RGB in 0..1: "
                      + ", ".join(f"{k}={list(v)}" for k, v in COLORS.items()) + "):\n" + "\n".join(lines))
            tasks.append(Task(
                id=f"scene-{seed}-{i}", domain=self.name,
                prompt=(Message("user", prompt),),
                verifier=Spec("step_efficiency", {"inner": {"name": "scene_match"}, "floor": 0.5}),
                difficulty=d, environment=Environment(tools=TOOLS),
                limits=Limits(max_steps=2 * ref, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
                metadata={"target_scene": scene.to_json(), "reference_steps": ref},
                oracle=dump_plan(steps),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        steps = parse_plan(task.oracle or "")
        kind = rng.choice(["drop_object", "shift", "bad_call"])
        calls = [s for s in steps if "tool" in s]
        if kind == "drop_object":
            victim = rng.choice([s["arguments"]["id"] for s in calls if s["tool"] == "scene_add_object"])
            steps = [s for s in steps if s.get("arguments", {}).get("id") != victim and s.get("arguments", {}).get("parent") != victim]
        elif kind == "shift":
            s = rng.choice([s for s in calls if s["tool"] == "scene_set_transform"])
            s["arguments"]["position"] = [p + 1.0 for p in s["arguments"]["position"]]
        else:
            steps.insert(0, {"tool": "scene_set_parent", "arguments": {"id": "ghost", "parent": None}})
        return dump_plan(steps)
