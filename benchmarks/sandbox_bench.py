"""Sandbox benchmark: modes side by side, HumanEval through the pool, disk, idle sessions.

    .venv/bin/python benchmarks/sandbox_bench.py [--n 300] [--repeats 3] [--sessions 1000 --hold 60]

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
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.sandbox.bench import bench_disk, bench_humaneval, bench_idle_sessions, bench_modes  # noqa: E402
from posttrain.sandbox.pool import SandboxPool  # noqa: E402


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


async def main(args) -> dict:
    out: dict = {"modes": await bench_modes(args.n)}
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
    m = res["modes"]
    bare_fork, plain, bare, fresh, pooled = (m[k] for k in ("bare fork", "plain subprocess", "plain -I -S", "fresh bwrap", "pooled zygote"))
    print(f"{'mode':<18}{'p50 ms':>9}{'p99 ms':>9}{'exec/s':>9}{'p50/plain':>11}{'p50/-I -S':>11}{'p50/fork':>10}")
    for name, r in m.items():
        print(f"{name:<18}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['exec_per_s']:>9.1f}{r['p50_ms'] / plain['p50_ms']:>10.2f}x"
              f"{r['p50_ms'] / bare['p50_ms']:>10.2f}x{r['p50_ms'] / bare_fork['p50_ms']:>9.2f}x")  # fmt: skip
    print("(plain subprocess: the base interpreter with its site hooks; plain -I -S: no site, like the sandbox's runtime;")
    print(" bare fork: fork() of a warm interpreter, no isolation -- the floor of any pool)\n")
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
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = asyncio.run(main(a))
    print(json.dumps(result, indent=1)) if a.json else report(result)
