"""Asynchronous RL on a simulated cluster: N rollout workers and one trainer, staleness bound K.

    .venv/bin/python benchmarks/async_sim.py [--costs benchmarks/results/async_rl.json] [--steps 400]

Per-phase costs come from real runs: the K = 0 sides of benchmarks/async_rl.py, per domain,
give a rollout time (generate + verify) and a trainer time (update + sync) for every step.
The model: a batch is max(P, N) groups (it grows with the cluster, so every worker has a
group; rollout work and trainer time grow with it); each group is one job of cost
rollout_s / P (rollout_s drawn from the measured steps) times a log-normal straggler factor
(sigma = --sigma, mean 1); N workers (the RL loop's own queue, schedule/longtail.py's
LongTailRunner with one lane of N slots, on virtual time: `simulate_queue`) take jobs in batch order, each as soon as it is free and the batch may start. Batch s
is pinned to weights version s - K (train/async_rl/pipeline.py), so it may start once the
trainer has finished step s - K - 1; the trainer runs step s once batch s is complete. K = 0 is
the synchronous loop.

Printed per domain and N = 1, 8, 64: seconds per step for each K, the speedup over K = 0 at the
same N, and the analytical bound (R/N + U) / max(R/N, U) with R, U the mean rollout and
trainer seconds per step (the most overlap can give; stragglers make K = 0 worse than R/N + U
and async can then beat the mean-cost bound by hiding them).

Limits: workers are identical, weight sync is part of the trainer's time and never blocks
rollouts, and a group's cost does not depend on the weights version.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
from pathlib import Path


def simulate(n_workers: int, k: int, steps: int, rollout_s: list[float], train_s: float, groups: int,
             sigma: float, seed: int = 0) -> float:
    """Seconds per trained step over `steps` steps."""
    rng = random.Random(seed)
    workers = [0.0] * n_workers  # heap of the times each worker is next free
    version_at = {0: 0.0}  # version -> time the trainer published it
    trainer_free = 0.0
    mu = -sigma * sigma / 2  # log-normal with mean 1
    for s in range(steps):
        may_start = version_at[max(0, s - k)]
        per_group = rng.choice(rollout_s) / groups
        done = 0.0
        for _ in range(groups):
            free = heapq.heappop(workers)
            end = max(free, may_start) + per_group * rng.lognormvariate(mu, sigma)
            heapq.heappush(workers, end)
            done = max(done, end)
        trainer_free = max(done, trainer_free) + train_s
        version_at[s + 1] = trainer_free
    return trainer_free / steps


def simulate_queue(n_workers: int, k: int, steps: int, rollout_s: list[float], train_s: float, groups: int,
                   sigma: float, seed: int = 0) -> float:
    """`simulate` with the workers played by the RL loop's own queue: posttrain.schedule.longtail's
    LongTailRunner (one lane of `n_workers` slots, as train/longtail_source.py runs it), on virtual
    time (posttrain/testing/simclock.py). The same draws in the same order, so the same seconds per step as
    the heap model (tests/unit/schedule/test_async_sim_queue.py holds them together)."""
    import asyncio
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from posttrain.schedule.longtail import Job, LongTailRunner
    from posttrain.testing.simclock import run_virtual

    rng = random.Random(seed)
    mu = -sigma * sigma / 2

    async def main() -> float:
        loop = asyncio.get_running_loop()
        runner = LongTailRunner(lambda job: asyncio.sleep(job.payload), route=False, short_concurrency=n_workers,
                                timeout_s=1e12, max_retries=0)
        published = {s: asyncio.Event() for s in range(steps + 1)}  # version -> the trainer published it
        published[0].set()
        left: dict[int, int] = {}  # batch -> groups not finished yet
        batch_done = {s: asyncio.Event() for s in range(steps)}
        submitted = asyncio.Event()

        async def produce() -> None:
            for s in range(steps):
                await published[max(0, s - k)].wait()  # batch s may start once version s - k exists
                per_group = rng.choice(rollout_s) / groups
                left[s] = groups
                for _ in range(groups):
                    runner.submit(Job(str(s), "sim", payload=per_group * rng.lognormvariate(mu, sigma)), version=s)
                submitted.set()

        async def deliver() -> None:
            while True:
                outs = await runner.collect(1)
                if not outs:  # nothing in flight: wait for the next batch
                    submitted.clear()
                    await submitted.wait()
                for o in outs:
                    s = int(o.job.key)
                    left[s] -= 1
                    if left[s] == 0:
                        batch_done[s].set()

        producer, delivery = loop.create_task(produce()), loop.create_task(deliver())
        for s in range(steps):
            await batch_done[s].wait()
            await asyncio.sleep(train_s)  # the update
            published[s + 1].set()
        end = loop.time()
        producer.cancel()
        delivery.cancel()
        await runner.close()
        return end / steps

    return run_virtual(main())


def bound(n_workers: int, r: float, u: float) -> float:
    """(R/N + U) / max(R/N, U): sync does rollout then update; perfect overlap does the longer one."""
    return (r / n_workers + u) / max(r / n_workers, u)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--costs", default="benchmarks/results/async_rl.json")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--ks", default="0,1,2,4")
    ap.add_argument("--json", default="benchmarks/results/async_sim.json")
    args = ap.parse_args()
    sides = [s for s in json.loads(Path(args.costs).read_text())["sides"] if s["k"] == 0]
    ks = [int(k) for k in args.ks.split(",")]
    out = []
    for side in sides:
        roll = [p["rollout_s"] for p in side["per_step"]]
        u = statistics.mean(p["train_s"] for p in side["per_step"])
        r = statistics.mean(roll)
        print(f"[{side['domain']}] measured per step: rollout {r:.2f}s, trainer {u:.2f}s, "
              f"{side['prompts_per_step']} groups a batch")
        p = side["prompts_per_step"]
        for n in (1, 8, 64):
            groups = max(p, n)  # the batch grows with the cluster (a group per worker at least)
            scale = groups / p  # rollout work and trainer time scale with the batch
            per = {k: simulate_queue(n, k, args.steps, [x * scale for x in roll], u * scale, groups, args.sigma)
                   for k in ks}  # the loop's queue (LongTailRunner); `simulate` (the heap model) gives the same
            row = {"domain": side["domain"], "N": n, "groups": groups, "step_s": per,
                   "speedup": {k: per[0] / per[k] for k in ks}, "bound": bound(n, r * scale, u * scale)}
            out.append(row)
            print(f"  N={n:>2} ({groups} groups): " + "  ".join(f"K={k} {per[k]:.3f}s x{row['speedup'][k]:.2f}" for k in ks)
                  + f"  | bound x{row['bound']:.2f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"args": vars(args), "rows": out}, indent=1))


if __name__ == "__main__":
    main()
