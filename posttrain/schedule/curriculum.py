"""A per-domain difficulty curriculum: keep each domain's group pass rate inside a band where GRPO learns.

    cur = Curriculum(tasks, band=(0.2, 0.8), window=32, min_evidence=16)
    allowed = cur.allowed()                  # [N] bool: tasks at their domain's current level
    cur.observe(task, rewards)              # scored rewards of one group
    moved = cur.update(step)                # {domain: (old, new)} for the levels that moved

The task pool holds tasks at several difficulty levels per domain (`task.difficulty`; make_splits
pools `schedule.curriculum.levels` when a curriculum is configured). Each domain sits at one level
and the scheduler draws only that level's tasks. After `min_evidence` scored rewards at the current
level, the pass rate over the last `window` of them decides: above `band[1]` the domain moves one
level up (too easy: most groups are all-pass, zero variance), below `band[0]` one level down (too
hard: all-fail groups). Hysteresis: a move clears the evidence, so the next decision waits for
`min_evidence` rewards at the new level, and a rate between the band's edges never moves; a domain
that just moved down is not moved up again before `cooldown` further decisions (one-level ping-pong
around the band's upper edge would otherwise cost half the steps).

Rewards of tasks from a level the domain has left (in flight when it moved) are ignored. A domain
with one level stays there. Pure bookkeeping: no model, no sandbox, no clock; `state_dict()` holds
everything a resumed run needs to make the same moves.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from posttrain.errors import ConfigError
from posttrain.types import Task


def check_args(band: Sequence[float], window: int, min_evidence: int, cooldown: int, start: float | None) -> None:
    """One-line ConfigError for bad curriculum arguments (also called at config load)."""
    if len(band) != 2 or not all(isinstance(b, (int, float)) for b in band):
        raise ConfigError(f"schedule.curriculum.band must be two pass rates [low, high], got {list(band)!r}")
    lo, hi = float(band[0]), float(band[1])
    if not 0.0 <= lo < hi <= 1.0:
        raise ConfigError(f"schedule.curriculum.band=[{lo:g}, {hi:g}] is empty: need 0 <= low < high <= 1")
    if window < 1 or min_evidence < 1 or min_evidence > window:
        raise ConfigError(f"schedule.curriculum: need 1 <= min_evidence <= window, got min_evidence={min_evidence}, "
                          f"window={window}")
    if cooldown < 0:
        raise ConfigError(f"schedule.curriculum.cooldown must be >= 0, got {cooldown}")


class Curriculum:
    def __init__(self, tasks: Sequence[Task], band: Sequence[float] = (0.2, 0.8), window: int = 32,
                 min_evidence: int = 16, cooldown: int = 2, start: float | None = None,
                 domains: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> None:
        check_args(band, window, min_evidence, cooldown, start)
        self.low, self.high = float(band[0]), float(band[1])
        self.window, self.min_evidence, self.cooldown = window, min_evidence, cooldown
        self.difficulty = np.asarray([float(t.difficulty) for t in tasks])  # [N]
        self.domain_of = [t.domain for t in tasks]
        every = sorted(set(self.domain_of))
        chosen = every if domains is None else list(domains)
        unknown = [d for d in [*chosen, *exclude] if d not in every]
        if unknown:
            raise ConfigError(f"schedule.curriculum names domain {unknown[0]!r}, which no training task has; "
                              f"domains: {', '.join(every)}")
        chosen = [d for d in chosen if d not in set(exclude)]
        self.levels = {d: sorted({float(self.difficulty[i]) for i, x in enumerate(self.domain_of) if x == d}) for d in chosen}
        self.level = {d: self._start(lv, start) for d, lv in self.levels.items()}
        self.recent: dict[str, deque[float]] = {d: deque(maxlen=window) for d in chosen}
        self.seen = {d: 0 for d in chosen}  # scored rewards at the current level since the last move
        self.hold = {d: 0 for d in chosen}  # decisions left before a domain that moved down may move up
        self.moves: list[tuple[int, str, float, float]] = []  # (step, domain, old, new)
        self.moved_at: dict[str, float] = {}  # the pass rate that made each domain's last move (window cleared since)

    @staticmethod
    def _start(levels: list[float], start: float | None) -> float:
        if start is None:
            return levels[0]
        return min(levels, key=lambda v: (abs(v - start), v))  # the nearest level the pool has

    def allowed(self) -> np.ndarray:
        """[N] bool: True for a task at its domain's current level (or of a domain without a curriculum)."""
        out = np.ones(len(self.domain_of), dtype=bool)
        for i, d in enumerate(self.domain_of):
            if d in self.level:
                out[i] = self.difficulty[i] == self.level[d]
        return out

    def observe(self, task: Task, rewards: Sequence[float]) -> None:
        d = task.domain
        if d not in self.level or float(task.difficulty) != self.level[d]:
            return  # not followed, or drawn at a level the domain has since left
        for r in rewards:
            self.recent[d].append(min(max(float(r), 0.0), 1.0))
        self.seen[d] += len(rewards)

    def pass_rate(self, d: str) -> float | None:
        return float(np.mean(self.recent[d])) if self.recent[d] else None

    def update(self, step: int) -> dict[str, tuple[float, float]]:
        """Move every domain with enough evidence whose pass rate left the band; the moves made."""
        moved = {}
        for d, lv in self.levels.items():
            if self.seen[d] < self.min_evidence:
                continue
            rate, i = float(np.mean(self.recent[d])), lv.index(self.level[d])
            self.hold[d] = max(0, self.hold[d] - 1)
            if rate > self.high and i + 1 < len(lv) and self.hold[d] == 0:
                new = lv[i + 1]
            elif rate < self.low and i > 0:
                new = lv[i - 1]
                self.hold[d] = self.cooldown
            else:
                continue
            moved[d] = (self.level[d], new)
            self.moved_at[d] = rate
            self.moves.append((step, d, self.level[d], new))
            self.level[d] = new
            self.recent[d].clear()
            self.seen[d] = 0
        return moved

    def metrics(self) -> dict[str, float]:
        """Level per domain (the one the next draw uses) and the pass rate over its window; in a row
        where a domain just moved (window cleared), the rate that moved it, so the curve shows the
        crossing rather than a gap."""
        out = {}
        for d in self.levels:
            out[f"sched/difficulty/{d}"] = self.level[d]
            rate = self.pass_rate(d)
            rate = self.moved_at.get(d) if rate is None else rate
            if rate is not None:
                out[f"sched/level_pass/{d}"] = rate
        if self.levels:
            out["sched/difficulty_mean"] = float(np.mean(list(self.level.values())))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"level": dict(self.level), "recent": {d: list(q) for d, q in self.recent.items()},
                "seen": dict(self.seen), "hold": dict(self.hold), "moves": [list(m) for m in self.moves],
                "moved_at": dict(self.moved_at)}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        if set(d["level"]) != set(self.levels):
            raise ConfigError(f"curriculum state follows domains {sorted(d['level'])}, this run {sorted(self.levels)}")
        for name, v in d["level"].items():
            if float(v) not in self.levels[name]:
                raise ConfigError(f"curriculum state puts {name!r} at level {v}, which its task pool does not have")
            self.level[name] = float(v)
        for name, rs in d["recent"].items():
            self.recent[name] = deque((float(r) for r in rs), maxlen=self.window)
        self.seen = {k: int(v) for k, v in d["seen"].items()}
        self.hold = {k: int(v) for k, v in d["hold"].items()}
        self.moves = [(int(s), str(n), float(a), float(b)) for s, n, a, b in d["moves"]]
        self.moved_at = {k: float(v) for k, v in d.get("moved_at", {}).items()}  # absent in states saved before it
