"""Scheduler benchmark on a simulated learner and a simulated rollout fleet.

    .venv/bin/python benchmarks/scheduler_sim.py            # 20 seeds, prints the tables
    .venv/bin/python benchmarks/scheduler_sim.py --seeds 5  # quicker

Part 1, sampling. Tasks have hidden difficulties d (the scheduler only sees a noisy,
bucketed `task.difficulty`). The learner solves task i with probability
sigmoid(a * (c[topic] - d_i) + m_i): c is a per-topic competence (shared by a task's
neighbours, including held-out ones) and m_i what it memorised of task i. A group of G
samples teaches in proportion to its reward variance, as a group-relative policy
gradient does: a group whose rewards are all equal teaches nothing. Every trajectory
generated counts as a sample, filtered or not. We count samples until the mean pass
probability on a held-out task set (same topics, m = 0) reaches the target.

Part 2, long tails. Rollout jobs, 10% of them 10x longer (mostly predictable from domain
and prompt length, a quarter not), run through the real `LongTailRunner` on a
virtual-time loop: a single FIFO lane with a step barrier (wait for the whole batch),
against a short lane plus a long lane with its own budget, carry-over and promotion,
at the same total concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.schedule import Scheduler  # noqa: E402
from posttrain.schedule.duration import DurationPredictor  # noqa: E402
from posttrain.schedule.filtering import has_signal  # noqa: E402
from posttrain.schedule.longtail import InfraError, Job, LongTailRunner  # noqa: E402
from posttrain.testing.simclock import run_virtual  # noqa: E402
from posttrain.types import Message, Spec, Task, Trajectory  # noqa: E402

TOPICS, PER_TOPIC, HELD_OUT = 4, 100, 50
SLOPE, LR_TOPIC, LR_TASK, C0 = 2.5, 0.004, 0.15, 1.0
BATCH, GROUP, TARGET, MAX_SAMPLES = 32, 8, 0.6, 400_000
CONFIGS = [  # name, policy, zero-variance filtering
    ("uniform", "uniform", False),
    ("uniform+filter", "uniform", True),
    ("difficulty_pools+filter", "difficulty_pools", True),
    ("learning_signal+filter", "learning_signal", True),
]


# -- part 1: the simulated learner -----------------------------------------------------------
_TASKS: dict[int, list[Task]] = {}  # per seed: Task objects cache their content hash


def _tasks(seed: int, noisy: np.ndarray) -> list[Task]:
    if seed not in _TASKS:
        _TASKS[seed] = [Task(id=f"t{i}", domain=f"topic{i // PER_TOPIC}", prompt=(Message("user", f"q{i}"),),
                             verifier=Spec("sim"), difficulty=round(float(noisy[i]), 1))
                        for i in range(len(noisy))]
    return _TASKS[seed]


class Learner:
    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.topic = np.repeat(np.arange(TOPICS), PER_TOPIC)  # [N]
        self.d = rng.uniform(0.0, 5.0, TOPICS * PER_TOPIC)  # [N] hidden difficulty
        self.m = np.zeros(TOPICS * PER_TOPIC)  # [N] memorised bonus
        self.c = np.full(TOPICS, C0) + rng.normal(0, 0.2, TOPICS)  # [K] competence
        self.held_topic = np.repeat(np.arange(TOPICS), HELD_OUT)
        self.held_d = rng.uniform(0.0, 5.0, TOPICS * HELD_OUT)
        self.rng = rng
        noisy = self.d + rng.normal(0, 0.7, len(self.d))  # what the task metadata says
        self.tasks = _tasks(seed, noisy)
        # Trajectories are frozen: one failed and one solved sample per task, shared by all groups.
        self.samples = [(Trajectory(t.id, "", t.domain, (), (), reward=0.0),
                         Trajectory(t.id, "", t.domain, (), (), reward=1.0)) for t in self.tasks]

    def p(self, i: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(SLOPE * (self.c[self.topic[i]] - self.d[i]) + self.m[i])))

    def held_out(self) -> float:
        return float(np.mean(1.0 / (1.0 + np.exp(-SLOPE * (self.c[self.held_topic] - self.held_d)))))

    def rollout(self, batch: list[Task]) -> list[list[Trajectory]]:
        idx = np.array([int(t.id[1:]) for t in batch])
        wins = self.rng.random((len(batch), GROUP)) < self.p(idx)[:, None]  # [B, G]
        return [[self.samples[i][int(w)] for w in row] for i, row in zip(idx.tolist(), wins)]

    def train(self, groups: list[list[Trajectory]]) -> None:
        for g in groups:
            i = int(g[0].task_id[1:])
            p = sum(t.reward for t in g) / len(g)
            v = p * (1.0 - p)  # group reward variance (0/1 rewards): zero-variance groups teach nothing
            self.c[self.topic[i]] += LR_TOPIC * v * GROUP
            self.m[i] += LR_TASK * v


def run_seed(seed: int) -> dict[str, dict[str, float]]:
    """Every policy on one seed, side by side (same hidden difficulties, same tasks)."""
    return {name: run_learner(seed, policy, filtered) for name, policy, filtered in CONFIGS}


def run_learner(seed: int, policy: str, filtered: bool) -> dict[str, float]:
    env = Learner(seed)
    sched = Scheduler(env.tasks, policy=policy, seed=seed)
    samples, sent, sent_zero = 0, 0, 0
    surplus: list[list[Trajectory]] = []  # kept groups beyond a full batch train next step
    while env.held_out() < TARGET and samples < MAX_SAMPLES:
        kept, surplus = surplus[:BATCH], surplus[BATCH:]
        rounds = 0
        while len(kept) < BATCH and rounds < (8 if filtered else 1):  # over-sample to fill the batch
            need = BATCH - len(kept)
            groups = env.rollout(sched.next_batch(sched.draw_count(need) if filtered else need))
            samples += GROUP * len(groups)
            sched.observe(groups)
            keep = sched.filter_groups(groups)
            kept += [g for g, k in zip(groups, keep) if k or not filtered]
            rounds += 1
        kept, surplus = kept[:BATCH], kept[BATCH:] + surplus
        sent += len(kept)
        sent_zero += sum(not has_signal(g) for g in kept)
        env.train(kept)
    return {"samples": samples, "zero_frac": sent_zero / max(sent, 1), "reached": env.held_out() >= TARGET}


# -- part 2: long-tail queues ----------------------------------------------------------------
STEPS, STEP_JOBS, CONCURRENCY, LONG_LANE, INFRA_P = 40, 32, 16, 3, 0.02


def make_jobs(seed: int, n: int) -> list[tuple[Job, float, bool]]:
    """(job, duration, is_long). Long: agent tasks with long prompts, plus surprises."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        domain = rng.choices(["arith", "code", "agent"], [0.45, 0.4, 0.15])[0]
        length = int(rng.lognormvariate(6.0, 0.8))
        predictable = domain == "agent" and length >= 400
        long = predictable or rng.random() < 0.025
        base = rng.lognormvariate(0.0, 0.3)
        out.append((Job(f"j{k}", domain, length, timeout_s=200.0), base * (10.0 if long else 1.0), long))
    return out


FLEETS = {  # name: (two lanes, step ends when the short lane is empty)
    "single FIFO, step barrier": (False, False),
    "long-tail queues": (True, True),
}


async def _fleet(seed: int, mode: str, long_factor: float) -> dict[str, float]:
    routed, carry = FLEETS[mode]
    jobs = make_jobs(seed, STEPS * STEP_JOBS * 2)
    info = {j.key: (dur, long) for j, dur, long in jobs}
    rng = random.Random(seed + 1)

    async def run(job: Job) -> str:
        if rng.random() < INFRA_P:
            raise InfraError("sandbox lost")
        await asyncio.sleep(info[job.key][0])
        return job.key

    short_cap = CONCURRENCY - LONG_LANE if routed else CONCURRENCY
    runner = LongTailRunner(run, predictor=DurationPredictor(long_factor=long_factor), short_concurrency=short_cap,
                            long_concurrency=LONG_LANE, route=routed, max_staleness=4)
    loop = asyncio.get_running_loop()
    stream, delivered, deferred = iter(jobs), [], 0
    for step in range(STEPS):
        admitted = 0
        while admitted < STEP_JOBS:
            job = next(stream)[0]
            # Admission control: never queue more long work than the long lane can clear.
            if routed and runner.lane_for(job) == "long" and runner.backlog("long") >= 2 * LONG_LANE:
                deferred += 1
                continue
            runner.submit(job, version=step)
            admitted += 1
        if routed:  # the step ends when the short lane is empty; long jobs carry over
            outs = await runner.collect_step(version=step)
        else:  # one lane: wait for the batch's worth of results (all of this step's, without carry-over)
            outs = await runner.collect(STEP_JOBS, version=step)
            if not carry:
                assert runner.in_flight() == 0
        delivered += [(o, loop.time()) for o in outs]
    elapsed = loop.time()
    await runner.close()
    shorts = [(o, t) for o, t in delivered if not info[o.job.key][1] and o.status == "ok"]
    longs = [o for o, _ in delivered if info[o.job.key][1] and o.status in ("ok", "stale")]
    run_lat = sorted(o.latency_s for o, _ in shorts)
    got_lat = sorted(t - o.submitted_at for o, t in shorts)  # until the trainer has it

    def p99(xs: list[float]) -> float:
        return xs[int(0.99 * (len(xs) - 1))]

    return {"short_tput": len(shorts) / elapsed, "long_tput": len(longs) / elapsed,
            "p99": p99(run_lat), "p99_delivered": p99(got_lat),
            "staleness": statistics.mean(o.staleness for o in longs) if longs else 0.0,
            "stale_frac": sum(o.status == "stale" for o in longs) / max(len(longs), 1),
            "deferred": deferred / (STEPS * STEP_JOBS + deferred)}


def run_fleet(seed: int, mode: str, long_factor: float = 3.0) -> dict[str, float]:
    return run_virtual(_fleet(seed, mode, long_factor))


# -- tables ----------------------------------------------------------------------------------
def _median(rows: list[dict], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    t0 = time.perf_counter()
    seeds = list(range(args.seeds))
    with ProcessPoolExecutor(args.workers) as ex:
        per_seed = list(ex.map(run_seed, seeds))
        learn = {name: [r[name] for r in per_seed] for name, *_ in CONFIGS}
        fleet = {(m, f): list(ex.map(run_fleet, seeds, [m] * len(seeds), [f] * len(seeds)))
                 for m in FLEETS for f in ((3.0, 2.5) if FLEETS[m][0] else (3.0,))}
    base = learn["uniform"]
    print(f"\nSampling: samples to held-out mean pass >= {TARGET} (median of {len(seeds)} seeds; "
          f"batch {BATCH} prompts x {GROUP})")
    print("| policy | samples (median) | samples vs uniform (median of per-seed ratios) "
          "| zero-variance groups sent to training | seeds reaching target |")
    print("|---|---|---|---|---|")
    for name, *_ in CONFIGS:
        rows = learn[name]
        ratio = statistics.median(r["samples"] / b["samples"] for r, b in zip(rows, base))
        change = f"{(1 - ratio):.0%} fewer" if ratio <= 1 else f"{ratio - 1:.0%} more"
        print(f"| {name} | {_median(rows, 'samples'):,.0f} | {ratio:.2f}x ({change}) "
              f"| {statistics.mean(r['zero_frac'] for r in rows):.1%} | {sum(r['reached'] for r in rows)}/{len(rows)} |")
    fifo = fleet[("single FIFO, step barrier", 3.0)]
    print(f"\nLong tails: {STEPS} steps x {STEP_JOBS} jobs, concurrency {CONCURRENCY} "
          f"(long lane {LONG_LANE}), ~10% of jobs 10x longer, {INFRA_P:.0%} infra errors (retried); "
          f"medians of {len(seeds)} seeds")
    print("| queues | long factor | short tasks / time unit | vs FIFO | short p99 run latency "
          "| short p99 latency to trainer | long tasks / time unit | long staleness (versions) "
          "| long results stale (> 4) | long deferred at admission |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (mode, f), rows in fleet.items():
        ratio = statistics.median(r["short_tput"] / b["short_tput"] for r, b in zip(rows, fifo))
        label = f"{mode} (default)" if FLEETS[mode][0] and f == DurationPredictor().long_factor else mode
        print(f"| {label} | {f if FLEETS[mode][0] else '-'} | {_median(rows, 'short_tput'):.2f} | {ratio:.2f}x "
              f"| {_median(rows, 'p99'):.2f} | {_median(rows, 'p99_delivered'):.2f} "
              f"| {_median(rows, 'long_tput'):.3f} | {_median(rows, 'staleness'):.2f} "
              f"| {_median(rows, 'stale_frac'):.1%} | {_median(rows, 'deferred'):.1%} |")
    print(f"\n(wall time {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
