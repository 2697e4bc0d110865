"""`blender_scene_match`: the saved Blender scene against the task's target, from geometry.

The verifier never trusts the episode: it re-runs the trajectory's blender_* calls in a
fresh sandboxed Blender (so observations and anything the model wrote in text count for
nothing), takes the file saved by the last successful `blender_save` (no save: score 0),
and opens it in a second fresh Blender that reports what Blender itself evaluates:
world-space bounds and volume of every mesh with its modifiers in effect, materials'
BSDF values, lights, the camera. Custom properties are never read.

Scoring (`score_report`, pure Python, unit-tested on a recorded report): each target
object is one item, right only if ALL of these hold: it exists as a visible mesh; its
world bounds match the target's within `tol` metres on every face (so position and
dimensions both); its material's name, colour, roughness and metallic match within
0.01; the array/boolean modifier the task asks for is present; the volume is within
`vol_rtol` of the expected (the shape's fill of its box, so a cube where a sphere was asked
fails; rows: count copies; holes: box minus the 64-gon cylinder);
its relation holds on the measured bounds (on top of: bottom on the other's top, centre
over it; left/right of: the stated gap; inside: bounds contained). The key light (type,
location, energy) and the camera (location, looking at the target) are one item each
where the task asks for them. Partial credit: score = right items / (items + extra
visible meshes), because each object is an independent part of the scene; an empty
scene, names without placement, or one huge object all score 0. `passed` means every
item right and no extras.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult, thaw
from posttrain.verifiers.base import VerifyContext


def _near(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol


def _bounds_ok(got: dict, lo: list[float], hi: list[float], tol: float) -> bool:
    return all(_near(got["min"][i], lo[i], tol) and _near(got["max"][i], hi[i], tol) for i in range(3))


def _material_ok(got: dict, want: dict) -> bool:
    mats = got.get("materials") or []
    if not mats or mats[0]["name"] != want["name"]:
        return False
    m = mats[0]
    return (all(_near(a, b, 0.01) for a, b in zip(m["color"], want["color"]))
            and _near(m["roughness"], want["roughness"], 0.01) and _near(m["metallic"], want["metallic"], 0.01))


def _relation_ok(rel: dict | None, got: dict, meshes: dict[str, dict], tol: float) -> bool:
    if rel is None:
        return True
    other = meshes.get(rel["of"])
    if other is None:
        return False
    lo, hi, olo, ohi = got["min"], got["max"], other["min"], other["max"]
    if rel["kind"] == "on_top_of":
        cx, cy = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2
        return _near(lo[2], ohi[2], tol) and olo[0] <= cx <= ohi[0] and olo[1] <= cy <= ohi[1]
    if rel["kind"] == "left_of":
        return _near(olo[0] - hi[0], rel["gap"], tol)
    if rel["kind"] == "right_of":
        return _near(lo[0] - ohi[0], rel["gap"], tol)
    if rel["kind"] == "inside":
        return all(olo[i] - tol <= lo[i] and hi[i] <= ohi[i] + tol for i in range(3))
    return False


def _object_problems(obj: dict, got: dict | None, meshes: dict[str, dict], tol: float, vol_rtol: float) -> list[str]:
    from posttrain.tasks.blender_scene import expected_bounds, expected_volume

    name = obj["name"]
    if got is None:
        return [f"{name}: no visible mesh of that name"]
    problems = []
    lo, hi = expected_bounds(obj)
    if not _bounds_ok(got, lo, hi, tol):
        problems.append(f"{name}: bounds {[round(v, 3) for v in got['min']]}..{[round(v, 3) for v in got['max']]}, "
                        f"want {[round(v, 3) for v in lo]}..{[round(v, 3) for v in hi]}")
    if not _material_ok(got, obj["material"]):
        problems.append(f"{name}: material is not {obj['material']['name']} with the asked values")
    for kind in ("array", "boolean"):
        if obj.get("array" if kind == "array" else "hole") and kind not in got.get("modifiers", []):
            problems.append(f"{name}: no {kind} modifier")
    vol = expected_volume(obj)
    if not math.isclose(got["volume"], vol, rel_tol=vol_rtol):
        problems.append(f"{name}: volume {got['volume']:.4f}, want {vol:.4f}")
    if not _relation_ok(obj.get("relation"), got, meshes, tol):
        problems.append(f"{name}: relation {obj['relation']['kind']} '{obj['relation']['of']}' does not hold")
    return problems


def _extras_problems(target: dict, report: dict, tol: float) -> tuple[int, list[str]]:
    """(items checked, problems) for the key light and the camera, when the task asks for them."""
    items, problems = 0, []
    by_name = {o["name"]: o for o in report["objects"]}
    if "light" in target:
        items += 1
        want, got = target["light"], by_name.get(target["light"]["name"])
        if not (got and got["type"] == "light" and got.get("light") == want["type"]
                and all(_near(a, b, tol) for a, b in zip(got["location"], want["location"]))
                and _near(got.get("energy", -1), want["energy"], 1.0)):
            problems.append(f"light {want['name']!r}: missing or not a {want['type']} light at {want['location']} of {want['energy']} W")
    if "camera" in target:
        items += 1
        want, got = target["camera"], by_name.get(report.get("camera") or "")
        if not (got and all(_near(a, b, tol) for a, b in zip(got["location"], want["location"]))
                and _looks_at(got, want["look_at"])):
            problems.append(f"camera: not the scene camera at {want['location']} looking at {want['look_at']}")
    return items, problems


def _looks_at(cam: dict, target: list[float], max_deg: float = 2.0) -> bool:
    view = cam.get("view_direction")
    if view is None:
        return False
    to = [t - c for t, c in zip(target, cam["location"])]
    n = math.sqrt(sum(v * v for v in to)) or 1.0
    cos = sum(a * b / n for a, b in zip(view, to))
    return cos >= math.cos(math.radians(max_deg))


def score_report(target: dict, report: dict, tol: float = 0.02, vol_rtol: float = 0.02) -> tuple[float, bool, dict]:
    """Score an inspection report (see the module doc): (score, passed, details)."""
    meshes = {o["name"]: o for o in report["objects"] if o["type"] == "mesh" and o["visible"]}
    wanted = {o["name"] for o in target["objects"]}
    problems: list[str] = []
    right = 0
    for obj in target["objects"]:
        p = _object_problems(obj, meshes.get(obj["name"]), meshes, tol, vol_rtol)
        right += not p
        problems += p
    extra_items, extra_problems = _extras_problems(target, report, tol)
    right += extra_items - len(extra_problems)
    problems += extra_problems
    extras = sorted(set(meshes) - wanted)
    items = len(target["objects"]) + extra_items
    score = right / (items + len(extras))
    passed = right == items and not extras
    return score, passed, {"items": items, "right": right, "extra_objects": extras, "problems": problems[:20]}


@verifier("blender_scene_match", answer_format="line")  # multi-step episodes: the step budget decides (rules.py)
class BlenderSceneMatch:
    def __init__(self, tol: float = 0.02, vol_rtol: float = 0.02) -> None:
        self.tol, self.vol_rtol = tol, vol_rtol

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        from posttrain.tasks.blender_session import inspect_blend
        from posttrain.tasks.plan import rerun_calls

        if "target" not in task.metadata:
            return VerifyResult.fail("task has no metadata.target")
        # the replay talks to a Blender process synchronously: keep it off the event loop
        state, calls = await asyncio.to_thread(lambda: asyncio.run(rerun_calls(task, trajectory)))
        session = state.get("blender")
        if session is not None:
            session.close()
        saved = state.get("blender_saved")
        wrong = sum(1 for _, ok, _ in calls if not ok)
        if saved is None:
            return VerifyResult(0.0, False, {"problems": ["the scene was never saved (blender_save)"], "calls": len(calls),
                                             "wrong_calls": wrong})
        report = await asyncio.to_thread(inspect_blend, saved)
        score, passed, details = score_report(thaw(task.metadata["target"]), report, self.tol, self.vol_rtol)
        return VerifyResult(score, passed, {**details, "calls": len(calls), "wrong_calls": wrong})
