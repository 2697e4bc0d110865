"""Blender sessions and the blender_scene checks: timings, concurrency, oracle and hack probes.

    python benchmarks/blender_scenes.py                       # full: 50 warm calls, 8 concurrent, the 30-task suite
    python benchmarks/blender_scenes.py --suite-tasks 4 --concurrent 2 --calls 20 --repeats 1   # smoke

Session part: start (bwrap + python + import bpy), warm tool-call latency (p50/p95 over
`--calls` alternating set_transform/query calls, host round trip), a 10-call episode
(start included, and warm), `--concurrent` sessions each running a 10-call episode at
once (infra errors counted), peak memory per session (cgroup high-water mark, else the
worker's max RSS). Checks part: on the built-in `blender_scene` suite, every oracle chain
replayed through the real verifier must pass (`--repeats` times each: 10 for the issue's
10/10), every hack probe (empty scene, names without placement, one huge object, the
expected values written as custom properties) must score 0, and the wrong answers must
fail. Needs `make blender`. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from posttrain.tasks.blender_runtime import missing_reason, venv_dir
from posttrain.tasks.blender_session import BlenderSession, inspect_blend
from posttrain.tasks.blender_scene import custom_property_probe_cmd, hack_plans
from posttrain.tasks.plan import parse_plan, _traj
from posttrain.types import ToolCall, Turn, thaw
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.blender_scene import BlenderSceneMatch, score_report

EPISODE = [("add_primitive", {"name": f"o{i}", "shape": "cube", "location": [i, 0, 1]}) for i in range(4)] + [
    ("add_material", {"name": "m", "color": [0.8, 0.1, 0.1], "roughness": 0.3}),
    ("assign_material", {"object": "o0", "material": "m"}),
    ("add_modifier", {"object": "o1", "type": "bevel", "width": 0.1}),
    ("set_transform", {"name": "o2", "scale": [0.5, 0.5, 2]}),
    ("query_scene", {}), ("save", {})]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def episode(warm: BlenderSession | None = None) -> dict[str, float]:
    t0 = time.perf_counter()
    s = warm or BlenderSession()
    started = time.perf_counter()
    for op, args in EPISODE:
        s.call(op, args)
    done = time.perf_counter()
    peak = s.peak_memory_bytes()
    if warm is None:
        s.close()
    return {"start_s": started - t0, "calls_s": done - started, "total_s": done - t0, "peak_mb": peak / 2**20}


def sessions(calls: int, concurrent: int) -> dict[str, Any]:
    out: dict[str, Any] = {"cold_episode": episode()}
    with BlenderSession() as s:
        s.call("add_primitive", {"name": "box", "shape": "cube"})
        lat = []
        for i in range(calls):
            t = time.perf_counter()
            s.call("set_transform", {"name": "box", "location": [i * 0.01, 0, 0]}) if i % 2 else s.call("query_scene")
            lat.append((time.perf_counter() - t) * 1000)
        out["warm_call_ms"] = {"p50": statistics.median(lat), "p95": _pct(lat, 0.95), "n": calls}
        s.call("reset")
        out["warm_episode"] = episode(s)
    errors: list[str] = []

    def one(_: int) -> dict[str, float] | None:
        try:
            return episode()
        except Exception as e:  # noqa: BLE001  counted: this is what the benchmark measures
            errors.append(f"{type(e).__name__}: {e}")
            return None

    t = time.perf_counter()
    with ThreadPoolExecutor(concurrent) as pool:
        runs = [r for r in pool.map(one, range(concurrent)) if r]
    out["concurrent"] = {"sessions": concurrent, "wall_s": time.perf_counter() - t, "infra_errors": len(errors),
                         "errors": errors[:3], "episode_total_s_max": max((r["total_s"] for r in runs), default=0.0),
                         "peak_mb_max": max((r["peak_mb"] for r in runs), default=0.0)}
    return out


def plan_trajectory(task: Any, plan: str) -> Any:
    """The trajectory of a plan's tool calls (the verifier replays them; nothing runs here)."""
    turns = [Turn("assistant", json.dumps(s), tool_call=ToolCall(s["tool"], s.get("arguments", {}), id=f"c{i}"))
             for i, s in enumerate(parse_plan(plan)) if "tool" in s]
    return _traj(task, turns)


def custom_property_probe(task: Any) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "probe.blend"
        subprocess.run(custom_property_probe_cmd(str(venv_dir() / "bin" / "python3"), task.metadata["target"], str(out)),
                       check=True, capture_output=True, timeout=120)
        return score_report(thaw(task.metadata["target"]), inspect_blend(out.read_bytes()))[0]


def checks(n_tasks: int, repeats: int, probe_tasks: int, every: int = 1) -> dict[str, Any]:
    import random

    from posttrain.eval.suite import load_suite
    from posttrain.tasks.blender_scene import BlenderSceneDomain

    tasks = load_suite("blender_scene").tasks[::every][:n_tasks]
    v, ctx, rng = BlenderSceneMatch(), VerifyContext(), random.Random(0)
    oracle_fail, probe_scores, wrong_passed, verify_s = [], {}, 0, []
    for i, t in enumerate(tasks):
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = asyncio.run(v(t, plan_trajectory(t, t.oracle), ctx))
            verify_s.append(time.perf_counter() - t0)
            if not r.passed:
                oracle_fail.append({"task": t.id, "problems": r.details.get("problems")})
        if i >= probe_tasks:
            continue
        for name, plan in hack_plans(t).items():
            probe_scores.setdefault(name, []).append(asyncio.run(v(t, plan_trajectory(t, plan), ctx)).score)
        probe_scores.setdefault("custom_properties", []).append(custom_property_probe(t))
        wrong_passed += asyncio.run(v(t, plan_trajectory(t, BlenderSceneDomain().wrong_answer(t, rng)), ctx)).passed
    return {"tasks": len(tasks), "oracle_runs": len(tasks) * repeats, "probe_tasks": min(probe_tasks, len(tasks)),
            "oracle_failures": oracle_fail,
            "hack_probe_max_score": {k: max(s) for k, s in probe_scores.items()}, "wrong_answers_passed": wrong_passed,
            "verify_s_p50": statistics.median(verify_s),
            "mean_oracle_tool_calls": statistics.mean(len([s for s in parse_plan(t.oracle) if "tool" in s]) for t in tasks)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--concurrent", type=int, default=8)
    ap.add_argument("--no-sessions", action="store_true", help="only the checks")
    ap.add_argument("--suite-tasks", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--every", type=int, default=1, help="take every K-th suite task (8: one per difficulty)")
    ap.add_argument("--probe-tasks", type=int, default=30, help="tasks that also get the hack probes and a wrong answer")
    a = ap.parse_args()
    why = missing_reason()
    if why:
        sys.exit(why)
    report = {"sessions": None if a.no_sessions else sessions(a.calls, a.concurrent), "checks": checks(a.suite_tasks, a.repeats, a.probe_tasks, a.every)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
