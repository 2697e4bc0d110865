"""Zero-variance filtering (DAPO dynamic sampling) and over-sampling to keep batches full.

A group whose scored rewards are all equal has all-zero group-relative advantages: it
costs a backward pass and carries no gradient. `has_signal` says whether a group is
worth training on; `fill_batch` keeps drawing replacement prompts until `n` groups with
signal are in hand, so the training batch stays full after filtering.

"Scored" excludes trajectories that never got a judgement about the model: verifier
infra errors, timeouts (`finish_reason == "timeout"`) and failures at the engine or
sandbox boundary. They are recorded elsewhere and kept out of the gradient.

Does not: bound the total cost of a step beyond `max_rounds`; a domain the model can
neither solve nor fail (all rewards equal forever) will exhaust the rounds and leave
the batch short, which `FillResult.short` reports rather than hiding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Protocol, Sequence

from posttrain.types import Task, Trajectory


class BatchSource(Protocol):
    """What `fill_batch` needs of a scheduler (the `Scheduler` in scheduler.py, which imports this module)."""

    def next_batch(self, n: int) -> list[Task]: ...
    def draw_count(self, missing: int) -> int: ...
    def observe(self, groups: Sequence[Sequence[Trajectory]]) -> None: ...
    def filter_groups(self, groups: Sequence[Sequence[Trajectory]]) -> list[bool]: ...

_UNSCORED_BOUNDARIES = ("engine", "sandbox")
_EPS = 1e-9


def is_scored(t: Trajectory) -> bool:
    if t.infra_error or t.finish_reason == "timeout":
        return False
    return t.error is None or t.error.boundary not in _UNSCORED_BOUNDARIES


def scored_rewards(group: Sequence[Trajectory]) -> list[float]:
    return [float(t.reward) for t in group if is_scored(t)]


def has_signal(group: Sequence[Trajectory]) -> bool:
    """True iff at least two scored rewards differ (by more than float noise)."""
    r = scored_rewards(group)
    return len(r) >= 2 and max(r) - min(r) > _EPS


@dataclass
class FillResult:
    groups: list[list[Trajectory]] = field(default_factory=list)  # kept, at most n
    drawn: int = 0  # prompts drawn over all rounds
    dropped: int = 0  # groups filtered out
    rounds: int = 0
    short: int = 0  # n - len(groups) when max_rounds ran out


Rollout = Callable[[list[Task]], Awaitable[Sequence[Sequence[Trajectory]]]]


async def fill_batch(sched: BatchSource, n: int, rollout: Rollout, max_rounds: int = 4) -> FillResult:
    """Draw, roll out, observe and filter until `n` groups with signal are kept.

    Each round draws `sched.draw_count(missing)` prompts, so the expected number of
    rounds stays near one once the keep rate is learnt. Every group is observed (the
    statistics need the all-solved and all-failed ones most), only kept ones return.
    Surplus kept groups beyond `n` are discarded in draw order (the batch is shuffled).
    """
    res = FillResult()
    while len(res.groups) < n and res.rounds < max_rounds:
        batch = sched.next_batch(sched.draw_count(n - len(res.groups)))
        if not batch:
            break
        groups = [list(g) for g in await rollout(batch)]
        sched.observe(groups)
        keep = sched.filter_groups(groups)
        res.drawn += len(batch)
        res.rounds += 1
        res.dropped += len(keep) - sum(keep)
        res.groups.extend(g for g, k in zip(groups, keep) if k)
    res.groups = res.groups[:n]
    res.short = n - len(res.groups)
    return res
