"""Sizing an evaluation before paying for it: a seeded, domain-stratified sample of a suite
(`posttrain eval --limit N`), and a time estimate from the first generated batch.

    small = limit_suite(load_suite("bfcl"), 10, seed=0)   # 10 tasks, every domain kept in proportion
    eta = Estimate(total=80); eta.update(done=4, elapsed_s=12.0); eta.line()

The sample is a pure function of (suite tasks, n, seed): the same --limit and --seed give the
same tasks, so a limited run resumes and compares like a full one. Each domain gets
round(n * share) tasks (largest remainder, at least one per domain while n allows), drawn
uniformly without replacement and kept in suite order.
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict

from posttrain.eval.records import EvalError
from posttrain.eval.suite import Suite
from posttrain.types import Task


def _allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Tasks per domain: proportional to its size, largest remainder, >= 1 each while n allows."""
    total = sum(sizes.values())
    floor = {d: min(s, n * s // total) for d, s in sizes.items()}
    if n >= len(sizes):
        floor = {d: max(1, k) for d, k in floor.items()}
    left = n - sum(floor.values())
    order = sorted(sizes, key=lambda d: (-(n * sizes[d] % total), d))
    while left > 0:
        grew = False
        for d in order:
            if left > 0 and floor[d] < sizes[d]:
                floor[d] += 1
                left -= 1
                grew = True
        if not grew:
            break
    while left < 0:  # the at-least-one rule overshot: take back from the largest domains
        d = max(floor, key=lambda x: (floor[x], x))
        floor[d] -= 1
        left += 1
    return floor


def stratified_sample(tasks: tuple[Task, ...], n: int, seed: int) -> tuple[Task, ...]:
    """`n` of `tasks`, stratified by domain, seeded; all of them when n >= len(tasks)."""
    if n < 1:
        raise EvalError(f"--limit must be >= 1, got {n}")
    if n >= len(tasks):
        return tasks
    by_domain: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        by_domain[t.domain].append(t)
    quota = _allocate({d: len(ts) for d, ts in by_domain.items()}, n)
    rng = random.Random(f"limit:{seed}")
    chosen = {t.id for d in sorted(by_domain) for t in rng.sample(by_domain[d], quota[d])}
    return tuple(t for t in tasks if t.id in chosen)


def limit_suite(suite: Suite, n: int | None, seed: int = 0) -> Suite:
    """The suite with only a stratified sample of `n` tasks (unchanged when n is None)."""
    if n is None:
        return suite
    return dataclasses.replace(suite, tasks=stratified_sample(suite.tasks, n, seed))


def fmt_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclasses.dataclass
class Estimate:
    """Rate and remaining time of an evaluation from the samples done so far in this segment."""

    total: int
    done: int = 0
    elapsed_s: float = 0.0

    def update(self, done: int, elapsed_s: float) -> None:
        self.done, self.elapsed_s = done, elapsed_s

    @property
    def per_sample_s(self) -> float:
        return self.elapsed_s / self.done if self.done else float("nan")

    @property
    def remaining_s(self) -> float:
        return self.per_sample_s * (self.total - self.done)

    def line(self) -> str:
        if not self.done:
            return f"0/{self.total} samples"
        return (f"{self.done}/{self.total} samples, {self.per_sample_s:.1f}s/sample, "
                f"eta {fmt_duration(self.remaining_s)}")
