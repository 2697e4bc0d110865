"""Overload benchmark (issue 21, item 13): many warm slots on few cores, fork-heavy honest programs.

    .venv/bin/python benchmarks/sandbox_overload.py [--slots 64] [--programs 128] [--wall 2.0]

Runs the same batch twice through a pooled SandboxPool of `--slots` slots:
  before: no admission cap (max_running = slots) and no starvation verdict, i.e. how the
          pool behaved before: a timeout is the program's failure whatever the host did;
  after:  the defaults (running cap 2 x cores, starved timeouts retried, then infra).
and prints, for each, how many honest programs were scored `timeout` (a model failure),
`ok`, or `sandbox_error` (infrastructure, kept out of the gradient), and the batch's wall
time. Every program here is honest and finishes in well under the wall limit when it
runs alone (the unloaded figure is printed first), so any `timeout` is a false failure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.sandbox.pool import SandboxPool, usable_cores  # noqa: E402
from posttrain.types import ExecLimits  # noqa: E402

FORK_HEAVY = """
import os
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        s = 0
        for i in range(20000):
            s += i
        os._exit(0)
    os.waitpid(pid, 0)
print("done")
"""


async def batch(pool: SandboxPool, n: int, wall: float) -> dict:
    t0 = time.perf_counter()
    res = await asyncio.gather(*(pool.exec(["python3", "-c", FORK_HEAVY], limits=ExecLimits(wall_s=wall))
                                 for _ in range(n)))
    counts = collections.Counter(r.status for r in res)
    starved = sum(1 for r in res if r.status == "sandbox_error" and "host overloaded" in r.error)
    return {"counts": dict(counts), "starved_infra": starved, "batch_s": round(time.perf_counter() - t0, 2)}


async def main(a) -> dict:
    out: dict = {"cores": usable_cores(), "slots": a.slots, "programs": a.programs, "wall_s": a.wall}
    solo = SandboxPool(concurrency=1, mode="pooled")
    r = await solo.exec(["python3", "-c", FORK_HEAVY], limits=ExecLimits(wall_s=30))
    out["unloaded_one_program_s"] = round(r.wall_s, 3)
    await solo.close()
    before = SandboxPool(concurrency=a.slots, mode="pooled", max_running=a.slots, starved_retries=0)
    await before.warm(n=a.slots)
    b = await batch(before, a.programs, a.wall)
    # no verdict before: a starved timeout was scored as the program's timeout
    b["model_failure_timeouts"] = b["counts"].get("timeout", 0) + b.pop("starved_infra")
    out["before"] = b
    await before.close()
    after = SandboxPool(concurrency=a.slots, mode="pooled")
    await after.warm(n=a.slots)
    f = await batch(after, a.programs, a.wall)
    f["model_failure_timeouts"] = f["counts"].get("timeout", 0)
    f["pool"] = {k: v for k, v in after.stats().items() if k != "last_slot_error"}
    out["after"] = f
    await after.close()
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--slots", type=int, default=64)
    p.add_argument("--programs", type=int, default=128)
    p.add_argument("--wall", type=float, default=2.0)
    print(json.dumps(asyncio.run(main(p.parse_args())), indent=1))
