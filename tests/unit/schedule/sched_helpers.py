"""Synthetic tasks and trajectories for the scheduler tests (no model, no sandbox)."""

from __future__ import annotations

import random

from posttrain.types import Message, Spec, Task, Trajectory, VerifyResult


def make_tasks(n: int = 60, domains: tuple[str, ...] = ("arith", "code"), levels: int = 3) -> list[Task]:
    return [
        Task(id=f"{domains[i % len(domains)]}-{i}", domain=domains[i % len(domains)],
             prompt=(Message("user", f"question {i}"),), verifier=Spec("exact_numeric"),
             difficulty=float((i // len(domains)) % levels))
        for i in range(n)
    ]


def traj(task: Task, reward: float, infra: bool = False, finish: str = "stop") -> Trajectory:
    verify = VerifyResult.infra("sandbox down") if infra else VerifyResult(reward, reward >= 1.0)
    return Trajectory(task.id, task.version, task.domain, (), (), reward=0.0 if infra else reward,
                      verify=verify, finish_reason=finish)


def group(task: Task, rewards: list[float]) -> list[Trajectory]:
    return [traj(task, r) for r in rewards]


def rollout_groups(batch: list[Task], p: dict[str, float], rng: random.Random, g: int = 4) -> list[list[Trajectory]]:
    """Bernoulli(p[task.id]) rewards, g samples per task."""
    return [group(t, [float(rng.random() < p[t.id]) for _ in range(g)]) for t in batch]
