"""Outage benchmark (issue 21, item 11): the verification loop through a real pool whose
zygotes are killed mid-run, then an outage that does not end.

    .venv/bin/python benchmarks/sandbox_outage.py [--rounds 12] [--outage-s 6] [--slots 4]

Phase 1 (transient outage): rounds of 16 distinct correct code answers are verified
(VerifierRunner, no verifier retries, so only the pool's own recovery counts). During
`--outage-s` seconds after round 2 every live zygote is SIGKILLed every 0.2 s. Printed:
the infra-error share during the outage and in the rounds after it, the pool's slot
deaths, and whether the rl.infra_error guard (threshold 0.2 over 64) fired.
Phase 2 (persistent outage): every slot dies as it is used; the guard must fire, once
with action=warn (the line is printed) and once with action=stop (the error is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.config import InfraErrorConfig  # noqa: E402
from posttrain.sandbox.pool import SandboxPool  # noqa: E402
from posttrain.sandbox.zygote import Zygote  # noqa: E402
from posttrain.tasks import generate_domain  # noqa: E402
from posttrain.train.infra_guard import InfraErrorGuard, InfraErrorRateExceeded  # noqa: E402
from posttrain.types import Trajectory, Turn  # noqa: E402
from posttrain.verifiers.run import VerifierRunner  # noqa: E402

TASKS = generate_domain("code", 8, 0)
BY_ID = {t.id: t for t in TASKS}


def answers(k: int) -> list[Trajectory]:
    return [Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", f"{t.oracle}+0*{1000 + 10 * k + j}"),))
            for t in TASKS for j in range(2)]


def kill_zygotes(pool: SandboxPool) -> int:
    """SIGKILL the zygote interpreter of every slot (idle or busy); returns how many."""
    n = 0
    for z in list(_slots(pool)):
        for pid in (z.cg.procs() if z.cg else []):
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"python3") and any(a.endswith(b"zygote_main.py") for a in argv):
                os.kill(pid, signal.SIGKILL)
                n += 1
    return n


def _slots(pool: SandboxPool):
    from posttrain.sandbox import zygote

    return [z for z in zygote._LIVE if z.cg is not None]


async def transient(a) -> dict:
    pool = SandboxPool(concurrency=a.slots, mode="pooled")
    await pool.warm(n=a.slots)
    vr = VerifierRunner(pool, concurrency=a.slots, retries=0)
    guard = InfraErrorGuard(InfraErrorConfig(window=64, min_samples=16, threshold=0.2, action="warn"), pool)
    rows, killed = [], 0
    loop = asyncio.get_running_loop()
    for k in range(a.rounds):
        outage = None
        if k == 2:
            end = loop.time() + a.outage_s

            async def keep_killing():
                nonlocal killed
                while loop.time() < end:
                    killed += kill_zygotes(pool)
                    await asyncio.sleep(0.2)

            outage = asyncio.ensure_future(keep_killing())
        trajs = await vr.verify_all(BY_ID, answers(k))
        while outage is not None and not outage.done():  # the outage phase: keep verifying until it ends
            trajs += await vr.verify_all(BY_ID, answers(100 + len(trajs)))
        guard.observe(trajs)
        rows.append({"round": k, "phase": "outage" if outage else ("before" if k < 2 else "after"),
                     "n": len(trajs), "infra": sum(t.infra_error for t in trajs),
                     "wrong": sum(t.reward < 1.0 and not t.infra_error for t in trajs)})
    await pool.close()
    after = [r for r in rows if r["phase"] == "after"]
    during = [r for r in rows if r["phase"] == "outage"]
    return {"zygotes_killed": killed, "slot_deaths": pool.stats()["slot_deaths"],
            "dead_slot_retries": pool.stats()["dead_slot_retries"],
            "infra_frac_during_outage": sum(r["infra"] for r in during) / max(1, sum(r["n"] for r in during)),
            "infra_frac_after_outage": sum(r["infra"] for r in after) / max(1, sum(r["n"] for r in after)),
            "scored_wrong_total": sum(r["wrong"] for r in rows), "guard_warnings": guard.warnings, "rounds": rows}


async def persistent(a) -> dict:
    real = Zygote.exec

    async def die_then_exec(self, *args, **kw):
        self.cg.kill_all()
        return await real(self, *args, **kw)

    Zygote.exec = die_then_exec
    out = {}
    try:
        for action in ("warn", "stop"):
            pool = SandboxPool(concurrency=a.slots, mode="pooled")
            vr = VerifierRunner(pool, concurrency=a.slots, retries=0)
            guard = InfraErrorGuard(InfraErrorConfig(window=64, min_samples=16, threshold=0.2, action=action), pool)
            try:
                guard.observe(await vr.verify_all(BY_ID, answers(0)))
                out[action] = guard.warnings[-1] if guard.warnings else "NOT FIRED"
            except InfraErrorRateExceeded as e:
                out[action] = f"stopped: {e}"
            await pool.close()
    finally:
        Zygote.exec = real
    return out


async def main(a) -> dict:
    return {"transient": await transient(a), "persistent": await persistent(a)}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--outage-s", type=float, default=6.0)
    p.add_argument("--slots", type=int, default=4)
    print(json.dumps(asyncio.run(main(p.parse_args())), indent=1))
