"""Sandbox benchmark: modes side by side, HumanEval through the pool, disk, idle sessions.

    .venv/bin/python benchmarks/sandbox_bench.py [--n 300] [--repeats 3] [--sessions 1000 --hold 60]
        [--before REV] [--groups 12]

`--before REV` adds the pooled and fresh paths of git revision REV as columns of the same
run (its posttrain/sandbox, imported as a package of its own; cgroups and the reaper are
shared), and python_tests GRPO groups of 8 answers before/after beside the old shared
batch (one sandbox for the whole group, exploitable: kept only to measure against).

Every mode runs the same snippet in one process, one after another: compare ratios, not
absolute times, on a shared machine (rerun if a figure looks load-bound).
Baselines: "bare fork" = fork() of this warm interpreter running the snippet (the floor
of any pool, no isolation at all); "plain subprocess" = the base interpreter started as
is (on some hosts a site .pth hook costs most of its start-up); "plain -I -S" = the same
interpreter without site, like the sandbox's clean runtime (the like-for-like baseline).

Targets, checked and printed as PASS/MISS:
  pooled snippet p50 <= 4 ms, p99 <= 30 ms, >= 300 exec/s (2-core machine), each execution
  with its own clean state (fresh namespaces, /dev, /dev/shm, /tmp, /work, network)
  fresh bwrap p50 <= 1.3x plain subprocess p50 (same program)
  HumanEval: 164 canonical pass, 164 broken fail, <= 3 s per set, zero flaky repeats
  disk: filling /work, /tmp, /dev/shm lowers host free disk and /dev/shm by <= workspace_mb
  idle sessions: N held for H seconds, memory reported, nothing left behind
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.sandbox.bench import bench_disk, bench_humaneval, bench_idle_sessions, bench_modes  # noqa: E402
from posttrain.sandbox.pool import SandboxPool  # noqa: E402


REPO = Path(__file__).resolve().parent.parent
_SHARED = ("cgroups", "reaper", "reaper_main")  # process-wide state (cgroup names, the reaper): never duplicated


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def load_before(rev: str):
    """The `pool` module of revision `rev`'s posttrain/sandbox, imported as its own package."""
    pkg = "sandbox_at_" + re.sub(r"\W", "_", rev)
    root = Path(tempfile.mkdtemp(prefix="sandbox-before-"))
    tar = subprocess.run(["git", "archive", rev, "posttrain/sandbox"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=tar, check=True)
    (root / "posttrain" / "sandbox").rename(root / pkg)
    own = re.compile(r"posttrain\.sandbox\.(?!(?:%s)\b)" % "|".join(_SHARED))
    for f in (root / pkg).rglob("*.py"):
        f.write_text(own.sub(pkg + ".", f.read_text()).replace("from posttrain.sandbox import", f"from {pkg} import"))
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{pkg}.pool")


class RunnerFromSource:
    """A sandbox that sends python_tests' runner as `-c` source, as before it was shipped
    precompiled: the sandbox compiles it for every answer."""

    def __init__(self, pool) -> None:
        self.pool = pool

    async def exec(self, cmd, files=None, **kw):
        from posttrain.verifiers.code_tests import RUNNER

        if list(cmd) == ["python3", "runner.pyc"]:
            cmd, files = ["python3", "-c", RUNNER], None
        return await self.pool.exec(cmd, files=files, **kw)


async def bench_groups(sandboxes: dict, groups: int, rounds: int = 3) -> dict[str, dict]:
    """python_tests GRPO groups of 8 answers through VerifierRunner: ms per group for each
    sandbox (name -> (sandbox, verifier name)), taking turns over `rounds` rounds."""
    import dataclasses

    from posttrain.tasks import generate_domain
    from posttrain.types import Spec, Trajectory, Turn
    from posttrain.verifiers.run import VerifierRunner

    base = generate_domain("code", groups, seed=7)
    out = {name: {"seconds": 0.0, "groups": 0, "infra": 0, "scores": []} for name in sandboxes}
    for _ in range(rounds):
        for name, (box, verifier) in sandboxes.items():
            tasks = [dataclasses.replace(t, id=f"{t.id}@{verifier}", verifier=Spec(verifier, dict(t.verifier.args))) for t in base]
            trajs = []
            for t in tasks:
                m, c = t.metadata["m"], t.metadata["c"]
                answers = [t.oracle, f"{c}+x*{m}", f"x*{m}+{c + 1}", f"x*{m + 1}+{c}", f"{c}", "1/0", f"x*{m}+{c}+0", f"(x*{m})+{c}"]
                trajs += [Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", a),), finish_reason="stop", sample=i)
                          for i, a in enumerate(answers)]  # fmt: skip
            t0 = time.perf_counter()
            res = await VerifierRunner(box).verify_all({t.id: t for t in tasks}, trajs)
            o = out[name]
            o["seconds"] += time.perf_counter() - t0
            o["groups"] += groups
            o["infra"] += sum(r.verify.status != "ok" for r in res)
            o["scores"] = [r.verify.score for r in res[:8]]
    return {name: {"ms_per_group": 1e3 * o["seconds"] / o["groups"], "infra": o["infra"], "first_group_scores": o["scores"]}
            for name, o in out.items()}  # fmt: skip


async def compare(args) -> dict:
    """The modes table with `--before`'s pooled and fresh paths as columns, and the groups."""
    before = load_before(args.before)
    conc = os.cpu_count() or 1
    old_pooled, old_fresh = before.SandboxPool(concurrency=conc, mode="pooled"), before.SandboxPool(concurrency=conc, mode="fresh")
    try:
        modes = await bench_modes(args.n, conc, {"pooled zygote (before)": old_pooled, "fresh bwrap (before)": old_fresh})
    finally:
        await old_pooled.close()
        await old_fresh.close()
    from posttrain.sandbox.bench import bench_cpu_per_exec

    old_bench = importlib.import_module(before.__name__.rsplit(".", 1)[0] + ".bench")
    cpu: dict[str, list[dict]] = {"pooled zygote": [], "pooled zygote (before)": []}
    for _ in range(3):  # taking turns: CPU per execution is the load-robust figure
        cpu["pooled zygote"].append(await bench_cpu_per_exec(args.n // 3))
        cpu["pooled zygote (before)"].append(await old_bench.bench_cpu_per_exec(args.n // 3))
    cpu_ms = {k: {f: statistics.median(r[f] for r in rs) for f in rs[0]} for k, rs in cpu.items() if rs and rs[0]}
    if not args.groups:
        return {"modes": modes, "cpu": cpu_ms}
    sys.path.insert(0, str(REPO / "benchmarks"))
    import humaneval_bench  # noqa: F401 - registers python_tests_legacy, the old shared batch

    new, old = SandboxPool(mode="pooled"), before.SandboxPool(mode="pooled")
    try:
        await new.warm("host")
        await old.warm("host")
        groups = await bench_groups({"python_tests": (new, "python_tests"),
                                     "python_tests (before)": (RunnerFromSource(old), "python_tests"),
                                     "shared batch (exploitable)": (new, "python_tests_legacy")}, args.groups)  # fmt: skip
    finally:
        await new.close()
        await old.close()
    return {"modes": modes, "cpu": cpu_ms, "groups": groups}


async def main(args) -> dict:
    start = os.getloadavg()
    if args.before:
        out = await compare(args)
    else:
        out = {"modes": await bench_modes(args.n)}
    out["load_start"] = start
    if args.modes_only:
        return out
    pool = SandboxPool(mode="pooled")
    await pool.warm("host")
    try:
        out["humaneval"] = await bench_humaneval(pool, args.repeats)
        out["disk"] = {"pooled": await bench_disk(pool)}
        fresh = SandboxPool(concurrency=1, mode="fresh")
        try:
            out["disk"]["fresh"] = await bench_disk(fresh)
        finally:
            await fresh.close()
        if args.sessions:
            out["sessions"] = await bench_idle_sessions(args.sessions, args.hold, pool)
    finally:
        await pool.close()
    return out


def report(res: dict) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"host load (uptime 1/5/15 min): {' '.join(f'{x:.2f}' for x in res['load_start'])} at the start, {load} at the end, {os.cpu_count()} cores")
    m = res["modes"]
    bare_fork, plain, bare, fresh, pooled = (m[k] for k in ("bare fork", "plain subprocess", "plain -I -S", "fresh bwrap", "pooled zygote"))
    print(f"{'mode':<24}{'p50 ms':>9}{'p99 ms':>9}{'exec/s':>9}{'p50/plain':>11}{'p50/-I -S':>11}{'p50/fork':>10}{'exec/s/fork':>13}")
    for name, r in m.items():
        print(f"{name:<24}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['exec_per_s']:>9.1f}{r['p50_ms'] / plain['p50_ms']:>10.2f}x"
              f"{r['p50_ms'] / bare['p50_ms']:>10.2f}x{r['p50_ms'] / bare_fork['p50_ms']:>9.2f}x"
              f"{r['exec_per_s'] / bare_fork['exec_per_s']:>12.2f}x")  # fmt: skip
    print("(plain subprocess: the base interpreter with its site hooks; plain -I -S: no site, like the sandbox's runtime;")
    print(" bare fork: fork() of a warm interpreter, no isolation -- the floor of any pool)\n")
    for new, old in (("pooled zygote", "pooled zygote (before)"), ("fresh bwrap", "fresh bwrap (before)")):
        if old in m:
            print(f"{new}: p50 {m[new]['p50_ms'] / m[old]['p50_ms']:.2f}x before, exec/s {m[new]['exec_per_s'] / m[old]['exec_per_s']:.2f}x before")
    for name, c in res.get("cpu", {}).items():
        print(f"{name}: CPU ms per snippet execution (median of 3 turns): " + ", ".join(f"{k} {v:.2f}" for k, v in c.items()))
    if "groups" in res:
        g = res["groups"]
        shared = g["shared batch (exploitable)"]["ms_per_group"]
        for name, r in g.items():
            print(f"{name:<28}{r['ms_per_group']:8.1f} ms/group {r['ms_per_group'] / shared:6.2f}x shared batch  infra {r['infra']}  first group {r['first_group_scores']}")
    if "humaneval" not in res:
        return
    checks = [
        ("pooled p50 <= 4 ms", pooled["p50_ms"] <= 4, f"{pooled['p50_ms']:.2f} ms ({pooled['p50_ms'] / bare_fork['p50_ms']:.2f}x bare fork)"),
        ("pooled p99 <= 30 ms", pooled["p99_ms"] <= 30, f"{pooled['p99_ms']:.2f} ms"),
        ("pooled >= 300 exec/s", pooled["exec_per_s"] >= 300, f"{pooled['exec_per_s']:.0f}/s ({pooled['exec_per_s'] / bare_fork['exec_per_s']:.2f}x bare fork)"),
        ("pooled >= 5x plain -I -S exec/s", pooled["exec_per_s"] >= 5 * bare["exec_per_s"], f"{pooled['exec_per_s'] / bare['exec_per_s']:.1f}x"),
        ("fresh p50 <= 1.3x plain p50", fresh["p50_ms"] <= 1.3 * plain["p50_ms"], f"{fresh['p50_ms'] / plain['p50_ms']:.2f}x"),
        ("fresh p50 <= 1.3x plain -I -S p50 (like for like)", fresh["p50_ms"] <= 1.3 * bare["p50_ms"], f"{fresh['p50_ms'] / bare['p50_ms']:.2f}x"),
    ]
    h = res["humaneval"]
    checks += [
        (f"HumanEval canonical pass {h['problems']}/{h['problems']}", h["canonical_pass"] == h["problems"], str(h["canonical_pass"])),
        (f"HumanEval broken fail {h['problems']}/{h['problems']}", h["broken_fail"] == h["problems"], str(h["broken_fail"])),
        ("HumanEval 328 programs <= 3 s", h["seconds_median"] <= 3, f"median {h['seconds_median']:.2f} s, max {h['seconds_max']:.2f} s"),
        (f"HumanEval {h['repeats']} repeats, zero flakes", h["flaky_repeats"] == 0, f"{h['flaky_repeats']} flaky"),
    ]
    for mode, d in res["disk"].items():
        drops = {k: v for k, v in d.items() if k.endswith("drop MiB")}
        ok = all(v <= d["workspace_mb"] for v in drops.values()) and d["written MiB"] <= d["workspace_mb"]
        checks.append((f"disk ({mode}): fill lowers host free space <= workspace_mb", ok,
                       f"wrote {d['written MiB']:.0f} MiB; " + ", ".join(f"{k.replace(' drop MiB', '')} -{v:.0f}" for k, v in drops.items()) + " MiB"))  # fmt: skip
    if "sessions" in res:
        s = res["sessions"]
        checks.append((f"{s['sessions']} idle sessions held {s['hold_s']:.0f} s, nothing left", s["left_behind"] == 0 and s["probe_ok"] > 0,
                       f"open {s['open_s']:.1f} s, RSS {s['rss_mib']:.0f} MiB ({s['rss_kib_per_session']:.0f} KiB/session), cgroup mem {s['cgroup_mem_mib']:.0f} MiB, close {s['close_s']:.1f} s"))  # fmt: skip
    for name, ok, val in checks:
        print(f"{_mark(ok)}  {name:<55} {val}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300, help="executions per fast mode (slow modes run n/5)")
    ap.add_argument("--repeats", type=int, default=3, help="HumanEval repeats")
    ap.add_argument("--sessions", type=int, default=0, help="idle sessions to hold (0: skip)")
    ap.add_argument("--hold", type=float, default=60.0, help="seconds to hold the idle sessions")
    ap.add_argument("--before", default="", help="git revision whose pooled/fresh paths run as extra columns")
    ap.add_argument("--groups", type=int, default=12, help="with --before: python_tests groups per round (0: skip)")
    ap.add_argument("--modes-only", action="store_true", help="skip HumanEval, disk and sessions")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = asyncio.run(main(a))
    print(json.dumps(result, indent=1)) if a.json else report(result)
