"""Sandbox benchmark: modes side by side, HumanEval through the pool, idle sessions.

    .venv/bin/python benchmarks/sandbox_bench.py [--n 300] [--repeats 10] [--sessions 1000 --hold 60]

Targets (issue 3), checked and printed as PASS/MISS:
  pooled snippet p50 <= 5 ms, p99 <= 30 ms, >= 300 exec/s, >= 5x plain subprocess exec/s
  fresh bwrap p50 <= 1.3x plain subprocess p50 (same program)
  HumanEval: 164 canonical pass, 164 broken fail, <= 3 s per set, zero flaky repeats
  idle sessions: N held for H seconds, memory reported, nothing left behind
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.sandbox.bench import bench_humaneval, bench_idle_sessions, bench_modes  # noqa: E402
from posttrain.sandbox.pool import SandboxPool  # noqa: E402


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


async def main(args) -> dict:
    out: dict = {"modes": await bench_modes(args.n)}
    pool = SandboxPool(mode="pooled")
    await pool.warm("host")
    try:
        out["humaneval"] = await bench_humaneval(pool, args.repeats)
        if args.sessions:
            out["sessions"] = await bench_idle_sessions(args.sessions, args.hold, pool)
    finally:
        await pool.close()
    return out


def report(res: dict) -> None:
    m = res["modes"]
    plain, bare, fresh, pooled = m["plain subprocess"], m["plain -I -S"], m["fresh bwrap"], m["pooled zygote"]
    print(f"{'mode':<18}{'p50 ms':>9}{'p99 ms':>9}{'exec/s':>9}{'p50/plain':>11}{'exec/s÷plain':>14}")
    for name, r in m.items():
        print(f"{name:<18}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['exec_per_s']:>9.1f}{r['p50_ms'] / plain['p50_ms']:>10.2f}x{r['exec_per_s'] / plain['exec_per_s']:>13.2f}x")
    print()
    checks = [
        ("pooled p50 <= 5 ms", pooled["p50_ms"] <= 5, f"{pooled['p50_ms']:.2f} ms"),
        ("pooled p99 <= 30 ms", pooled["p99_ms"] <= 30, f"{pooled['p99_ms']:.2f} ms"),
        ("pooled >= 300 exec/s", pooled["exec_per_s"] >= 300, f"{pooled['exec_per_s']:.0f}/s"),
        ("pooled >= 5x plain exec/s", pooled["exec_per_s"] >= 5 * plain["exec_per_s"], f"{pooled['exec_per_s'] / plain['exec_per_s']:.1f}x"),
        ("fresh p50 <= 1.3x plain p50", fresh["p50_ms"] <= 1.3 * plain["p50_ms"], f"{fresh['p50_ms'] / plain['p50_ms']:.2f}x"),
        ("fresh p50 <= 1.3x plain -I -S p50 (like for like)", fresh["p50_ms"] <= 1.3 * bare["p50_ms"], f"{fresh['p50_ms'] / bare['p50_ms']:.2f}x"),
        ("pooled >= 5x plain -I -S exec/s", pooled["exec_per_s"] >= 5 * bare["exec_per_s"], f"{pooled['exec_per_s'] / bare['exec_per_s']:.1f}x"),
    ]
    h = res["humaneval"]
    checks += [
        (f"HumanEval canonical pass {h['problems']}/{h['problems']}", h["canonical_pass"] == h["problems"], str(h["canonical_pass"])),
        (f"HumanEval broken fail {h['problems']}/{h['problems']}", h["broken_fail"] == h["problems"], str(h["broken_fail"])),
        ("HumanEval 328 programs <= 3 s", h["seconds_median"] <= 3, f"median {h['seconds_median']:.2f} s, max {h['seconds_max']:.2f} s"),
        (f"HumanEval {h['repeats']} repeats, zero flakes", h["flaky_repeats"] == 0, f"{h['flaky_repeats']} flaky"),
    ]
    if "sessions" in res:
        s = res["sessions"]
        checks.append((f"{s['sessions']} idle sessions held {s['hold_s']:.0f} s, nothing left", s["left_behind"] == 0 and s["probe_ok"] > 0,
                       f"open {s['open_s']:.1f} s, RSS {s['rss_mib']:.0f} MiB ({s['rss_kib_per_session']:.0f} KiB/session), cgroup mem {s['cgroup_mem_mib']:.0f} MiB, close {s['close_s']:.1f} s"))  # fmt: skip
    for name, ok, val in checks:
        print(f"{_mark(ok)}  {name:<50} {val}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300, help="executions per mode")
    ap.add_argument("--repeats", type=int, default=10, help="HumanEval repeats")
    ap.add_argument("--sessions", type=int, default=0, help="idle sessions to hold (0: skip)")
    ap.add_argument("--hold", type=float, default=60.0, help="seconds to hold the idle sessions")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = asyncio.run(main(a))
    print(json.dumps(result, indent=1)) if a.json else report(result)
