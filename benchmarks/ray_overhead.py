"""Sandbox throughput and latency through the Ray path vs the local pool, measured side by side.

    python benchmarks/ray_overhead.py [--batches 64,128] [--rounds 3] [--slots N]

One process, one machine: a local `SandboxPool` with N slots, and a loopback Ray
cluster (localcluster.py, one node with N CPUs) whose `SandboxPoolActor` has the same
N slots behind `RaySandbox`. Rounds alternate local / Ray so machine noise hits both;
medians are reported. Columns:

- throughput ratio (Ray / local) for batches of >= 64 executions (target >= 0.8)
- p50 latency of one execution alone, local and Ray, and the added p50
- dispatcher cost: driver CPU seconds per execution on the Ray path (admission,
  routing, Ray submission and result decoding), and the pure routing decision alone
  over a 100-node x 100-slot router (what a 10,000-sandbox cluster's dispatcher pays)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.types import ExecLimits  # noqa: E402

CMD = ["python3", "-c", "print(sum(range(1000)))"]
LIM = ExecLimits(wall_s=30, cpu_s=30)


async def batch(box, n: int) -> float:
    t0 = time.perf_counter()
    res = await asyncio.gather(*(box.exec(CMD, limits=LIM) for _ in range(n)))
    bad = [r for r in res if r.status != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} failed: {bad[0].status} {bad[0].error[:200]}")
    return time.perf_counter() - t0


async def latencies(box, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await box.exec(CMD, limits=LIM)
        assert r.status == "ok", r.error
        out.append(time.perf_counter() - t0)
    return out


def routing_cost(nodes: int = 100, slots: int = 100, n: int = 20000) -> float:
    """Seconds per admit+release over a nodes x slots router (pure Python, no Ray)."""
    from posttrain.distributed.routing import Router, Slot

    async def go() -> float:
        r = Router([Slot(f"n{i}", slots) for i in range(nodes)])
        held = [await r.admit() for _ in range(nodes * slots // 2)]  # half full: a realistic pick
        t0 = time.perf_counter()
        for _ in range(n):
            r.release(await r.admit())
        dt = time.perf_counter() - t0
        for s in held:
            r.release(s)
        return dt / n

    return asyncio.run(go())


async def measure(local, remote, batches: list[int], rounds: int) -> dict:
    tp: dict[int, dict[str, list[float]]] = {b: {"local": [], "ray": []} for b in batches}
    cpu_per_exec: list[float] = []
    for b in batches:  # warm both paths (zygotes, Ray workers, imports)
        await batch(local, min(b, 16))
        await batch(remote, min(b, 16))
    for _ in range(rounds):
        for b in batches:
            tp[b]["local"].append(b / await batch(local, b))
            c0 = time.process_time()
            tp[b]["ray"].append(b / await batch(remote, b))
            cpu_per_exec.append((time.process_time() - c0) / b)
    lat_l, lat_r = [], []
    for _ in range(rounds):
        lat_l += await latencies(local, 10)
        lat_r += await latencies(remote, 10)
    return {"tp": tp, "cpu": cpu_per_exec, "lat_local": lat_l, "lat_ray": lat_r}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slots", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--exec-batch", type=int, default=None, help="cluster.exec_batch (default: the config's)")
    ap.add_argument("--ahead", type=int, default=None, help="cluster.queue_per_slot (default: the config's)")
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]

    from posttrain.config import ClusterConfig
    from posttrain.distributed.dispatcher import RaySandbox
    from posttrain.distributed.localcluster import LocalCluster
    from posttrain.distributed.placement import connect
    from posttrain.sandbox.pool import SandboxPool

    import ray

    with LocalCluster({"pt_node_a": a.slots}) as c:
        try:
            connect(c.address)
            over = {k: v for k, v in (("exec_batch", a.exec_batch), ("queue_per_slot", a.ahead)) if v is not None}
            ccfg = ClusterConfig(address=c.address, start_jitter_s=0.1, warm_slots=a.slots, **over)
            a.exec_batch, a.ahead = ccfg.exec_batch, ccfg.queue_per_slot
            remote = RaySandbox.create(ccfg)
            local = SandboxPool(concurrency=a.slots)

            async def run() -> dict:
                await local.warm(n=a.slots)
                try:
                    out = await measure(local, remote, batches, a.rounds)
                    out["per_call"] = remote.cluster_metrics()["cluster/sandbox/exec_per_call"]
                    return out
                finally:
                    await local.close()
                    await remote.close()

            r = asyncio.run(run())
        finally:
            ray.shutdown()
    route_s = routing_cost()
    med = statistics.median
    print(f"slots={a.slots} rounds={a.rounds} command={' '.join(CMD)!r}")
    print(f"{'batch':>6} {'local exec/s':>13} {'ray exec/s':>11} {'ray/local':>10}")
    for b in batches:
        lo, ra = med(r["tp"][b]["local"]), med(r["tp"][b]["ray"])
        print(f"{b:>6} {lo:>13.1f} {ra:>11.1f} {ra / lo:>10.2f}")
    pl, pr = med(r["lat_local"]), med(r["lat_ray"])
    print(f"p50 latency, one execution alone: local {pl * 1e3:.1f} ms, ray {pr * 1e3:.1f} ms, "
          f"added {1e3 * (pr - pl):+.1f} ms (ratio {pr / pl:.2f})")
    print(f"executions per remote call: {(r['per_call'] if a.exec_batch > 1 else 1.0):.1f} (exec_batch={a.exec_batch}, queue_per_slot={a.ahead})")
    cpu = med(r["cpu"])
    print(f"dispatcher cost: driver CPU {cpu * 1e6:.0f} us per Ray execution "
          f"(-> one driver core dispatches ~{1 / cpu:.0f} exec/s)")
    print(f"routing decision alone (100 nodes x 100 slots, half full): {route_s * 1e6:.1f} us per admit+release")


if __name__ == "__main__":
    main()
