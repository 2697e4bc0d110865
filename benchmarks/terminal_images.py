"""Terminal tasks in real images: build, reuse, episode start, concurrency, the regression set.

    .venv/bin/python benchmarks/terminal_images.py [--cold-builds 2] [--starts 200] [--concurrent 32]
        [--repeats 10] [--json benchmarks/results/terminal_images.json]

`--cold-builds 0` times only the reuse (on the default image store); `-1` skips builds.

Targets, printed as PASS/MISS:
  an image with python3, git and `RUN apt-get install -y jq` builds cold in < 3 min (each cold
  build uses an empty image store of its own), is reused in < 1 s, and two cold builds give
  the same digest (recipe + pinned package manifest)
  episode start (a session on a warm image) p50 <= 50 ms
  32 concurrent multi-step episodes with no infra error
  every reference solution of the terminal set passes `--repeats` times out of `--repeats`,
  every empty solution and every faking one (plants a reward and tests, writes fake outputs) scores 0
The set's step counts (reference steps per task) are reported. The machine is shared:
compare figures from one run, and rerun if one looks load-bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JQ_IMAGE = """FROM debian:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3 git
RUN apt-get install -y jq
"""
_TIMED_BUILD = ("import sys, time; from posttrain.sandbox.rootfs_build import build_rootfs; t = time.perf_counter(); "
                "img = build_rootfs(sys.argv[1]); print(img.digest, time.perf_counter() - t)")


def _build(dockerfile: Path, home: Path | None) -> tuple[str, float, float]:
    """(digest, seconds of the build call, seconds of the whole process) in a fresh process using image store `home`."""
    env = {**os.environ, **({"POSTTRAIN_SANDBOX_HOME": str(home)} if home else {})}
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _TIMED_BUILD, str(dockerfile)], env=env, capture_output=True, text=True, check=True)
    digest, secs = out.stdout.split()
    return digest, float(secs), time.perf_counter() - t


def bench_builds(cold_builds: int) -> dict:
    """Cold builds, each in an empty image store of its own; then reuse (a new process each time, the build call
    timed apart from the interpreter's start and imports). With no cold build, reuse is timed on the default store."""
    work = Path(tempfile.mkdtemp(prefix="pt-img-bench-"))
    os.chmod(work, 0o755)  # the sandbox uid reads the layers under it
    (work / "Dockerfile").write_text(JQ_IMAGE)
    cold, digests = [], []
    for i in range(cold_builds):
        d, s, _ = _build(work / "Dockerfile", work / f"home{i}")
        cold.append(s)
        digests.append(d)
    home = work / "home0" if cold_builds else None
    if home is None:
        digests.append(_build(work / "Dockerfile", None)[0])  # warm-up: builds it once if it is not there yet
    reuse = [_build(work / "Dockerfile", home) for _ in range(3)]
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return {"cold_s": cold, "reuse_s": [r[1] for r in reuse], "reuse_process_s": [r[2] for r in reuse], "digests": digests,
            "same_digest": len(set(digests)) == 1 and all(r[0] == digests[0] for r in reuse)}


async def bench_starts(image: str, n: int) -> dict:
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool(concurrency=2)
    await pool.warm(image)
    lat = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            s = await pool.open_session(image)
            lat.append(time.perf_counter() - t)
            await s.close()
            await asyncio.sleep(0.05)  # an episode lasts longer than this: the refill has its turn
    finally:
        hits, misses = pool.warm_sessions.hits, pool.warm_sessions.misses
        await pool.close()
    lat.sort()
    return {"n": n, "p50_ms": 1000 * lat[n // 2], "p90_ms": 1000 * lat[int(n * 0.9)], "max_ms": 1000 * lat[-1],
            "warm_hits": hits, "warm_misses": misses}


async def bench_concurrent(image: str, n: int) -> dict:
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool(concurrency=n)

    async def episode(i: int) -> list[str]:
        async with pool.session(image) as s:
            a = await s.run(f"git init -q r{i} && cd r{i} && echo {i} > f && git add f && git commit -q -m x", timeout=60)
            b = await s.run("python3 -c 'print(sum(range(1000)))' | jq '. + 1'", timeout=60)
            c = await s.run("git log --oneline | wc -l", timeout=60)
            return [a.status, b.status, c.status, b.stdout.strip(), c.stdout.strip()]

    t = time.perf_counter()
    try:
        got = await asyncio.gather(*(episode(i) for i in range(n)), return_exceptions=True)
    finally:
        await pool.close()
    infra = [repr(g) for g in got if isinstance(g, BaseException) or "sandbox_error" in g]
    wrong = [g for g in got if not isinstance(g, BaseException) and g[3:] != ["499501", "1"]]
    return {"episodes": n, "infra_errors": len(infra), "wrong_results": len(wrong), "wall_s": time.perf_counter() - t,
            "first_error": infra[0] if infra else ""}


async def bench_set(repeats: int, concurrency: int) -> dict:
    from posttrain.sandbox import SandboxPool
    from posttrain.tasks.terminal_images import TerminalSet
    from posttrain.verifiers.soundness.check import score_once

    t0 = time.perf_counter()
    tasks = TerminalSet().generate(1000, 0)
    load_s = time.perf_counter() - t0
    pool = SandboxPool(concurrency=concurrency)
    sem = asyncio.Semaphore(concurrency)
    fake = {t.id: TerminalSet().wrong_answer(t, random.Random(0)) for t in tasks}

    async def one(t, text):
        async with sem:
            return (await score_once(t, text, pool)).score

    jobs = [(t.id, "oracle", one(t, t.oracle)) for t in tasks for _ in range(repeats)]
    jobs += [(t.id, "empty", one(t, "")) for t in tasks] + [(t.id, "fake", one(t, fake[t.id])) for t in tasks]
    t1 = time.perf_counter()
    try:
        scores = await asyncio.gather(*(j[2] for j in jobs))
    finally:
        await pool.close()
    per: dict[str, dict[str, list[float]]] = {}
    for (tid, kind, _), sc in zip(jobs, scores):
        per.setdefault(tid, {}).setdefault(kind, []).append(sc)
    steps = [t.metadata["reference_steps"] for t in tasks]
    return {
        "tasks": len(tasks), "repeats": repeats, "load_s": load_s, "episodes": len(jobs), "wall_s": time.perf_counter() - t1,
        "oracle_all_pass": [tid for tid, d in per.items() if all(s == 1.0 for s in d["oracle"])].__len__(),
        "oracle_failures": {tid: d["oracle"].count(1.0) for tid, d in per.items() if any(s != 1.0 for s in d["oracle"])},
        "empty_scoring": [tid for tid, d in per.items() if d["empty"][0] > 0],
        "fake_scoring": [tid for tid, d in per.items() if d["fake"][0] > 0],
        "reference_steps": {"mean": statistics.mean(steps), "min": min(steps), "max": max(steps), "total": sum(steps)},
    }


def _report(r: dict) -> None:
    b, s, c, t = r.get("builds"), r.get("starts"), r.get("concurrent"), r.get("set")
    checks = []
    if b:
        if b["cold_s"]:
            checks += [("cold build < 180 s", max(b["cold_s"]) < 180, f"{', '.join(f'{x:.1f}' for x in b['cold_s'])} s"),
                       ("same digest from two cold builds", b["same_digest"] and len(b["digests"]) >= 2, b["digests"][0][:19])]
        checks.append(("reuse < 1 s", max(b["reuse_s"]) < 1.0, f"build call {max(b['reuse_s']):.2f} s, whole process "
                       f"{max(b['reuse_process_s']):.2f} s"))
    if s:
        checks.append(("episode start p50 <= 50 ms", s["p50_ms"] <= 50, f"p50 {s['p50_ms']:.2f} ms, p90 {s['p90_ms']:.2f} ms, "
                       f"hits {s['warm_hits']}/{s['n']}"))
    if c:
        checks.append((f"{c['episodes']} concurrent episodes, no infra errors", c["infra_errors"] == 0 and c["wrong_results"] == 0,
                       f"{c['infra_errors']} infra, {c['wrong_results']} wrong, {c['wall_s']:.1f} s"))
    if t:
        checks += [(f"reference {t['repeats']}/{t['repeats']} on every task", t["oracle_all_pass"] == t["tasks"], f"{t['oracle_all_pass']}/{t['tasks']} tasks {t['oracle_failures'] or ''}"),
                   ("every empty solution fails", not t["empty_scoring"], str(t["empty_scoring"] or "all 0")),
                   ("every faking solution scores 0", not t["fake_scoring"], str(t["fake_scoring"] or "all 0"))]
        print(f"set: {t['tasks']} tasks, {t['episodes']} episodes in {t['wall_s']:.0f} s; reference steps {t['reference_steps']}")
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {detail}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold-builds", type=int, default=2)
    ap.add_argument("--starts", type=int, default=200)
    ap.add_argument("--concurrent", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--set-concurrency", type=int, default=4)
    ap.add_argument("--json", default="benchmarks/results/terminal_images.json")
    a = ap.parse_args()
    r: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "args": vars(a)}
    if a.cold_builds >= 0:
        r["builds"] = bench_builds(a.cold_builds)
    from posttrain.tasks.terminal_images import SET_DIR
    from posttrain.tasks.harbor import load_harbor_task

    image = load_harbor_task(SET_DIR / "fix-median").environment.image  # the set's shared base plus one small layer
    if a.starts:
        r["starts"] = asyncio.run(bench_starts(image, a.starts))
    if a.concurrent:
        r["concurrent"] = asyncio.run(bench_concurrent(image, a.concurrent))
    if a.repeats:
        r["set"] = asyncio.run(bench_set(a.repeats, a.set_concurrency))
    Path(a.json).write_text(json.dumps(r, indent=1))
    _report(r)


if __name__ == "__main__":
    main()
