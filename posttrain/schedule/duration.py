"""Predict how long a task will take from the history of similar tasks.

Similar means: the same domain and the same prompt-length band (powers of two), the two
features known before a rollout starts. A prediction is the median of the recent
durations at the most specific level that has enough history, falling back to the
domain, then to every task, then to a prior. The long threshold is `long_factor` times
the global median (or an absolute `long_threshold_s`), and a task is routed as *long*
when at least a `long_risk` fraction of its similar tasks ran past it: a band that mixes
short and long tasks goes to the long lane rather than gambling the short one.

Medians, not means: a few timeouts must not turn a whole domain "long".

Does not: use the task's content, the model version, or the load on the machine; a
mispredicted long task is caught at run time by `LongTailRunner` (promotion), not here.
"""

from __future__ import annotations

import math
from collections import deque
from statistics import median
from typing import Any


def length_band(length: int) -> int:
    """0 for length <= 1, then floor(log2(length)): 2-3 -> 1, 4-7 -> 2, ..."""
    return int(math.log2(length)) if length > 1 else 0


class DurationPredictor:
    def __init__(self, long_factor: float = 3.0, long_threshold_s: float | None = None,
                 window: int = 64, min_history: int = 3, prior_s: float = 1.0, long_risk: float = 0.3) -> None:
        if long_factor <= 1.0 or window < 1 or min_history < 1 or prior_s <= 0 or not 0 < long_risk <= 1:
            raise ValueError(f"DurationPredictor: need long_factor > 1, window >= 1, min_history >= 1, "
                             f"prior_s > 0, 0 < long_risk <= 1; got {long_factor}, {window}, {min_history}, "
                             f"{prior_s}, {long_risk}")
        if long_threshold_s is not None and long_threshold_s <= 0:
            raise ValueError(f"DurationPredictor long_threshold_s must be > 0, got {long_threshold_s}")
        self.long_factor, self.long_threshold_s = long_factor, long_threshold_s
        self.window, self.min_history, self.prior_s, self.long_risk = window, min_history, prior_s, long_risk
        # key "domain|band", "domain|*" or "*" -> recent durations in seconds
        self.history: dict[str, deque[float]] = {}

    @staticmethod
    def _keys(domain: str, length: int) -> list[str]:
        return [f"{domain}|{length_band(length)}", f"{domain}|*", "*"]

    def update(self, domain: str, length: int, seconds: float) -> None:
        if not (math.isfinite(seconds) and seconds >= 0):
            return  # a clock glitch is not a duration
        for key in self._keys(domain, length):
            self.history.setdefault(key, deque(maxlen=self.window)).append(float(seconds))

    def _history(self, domain: str, length: int) -> deque[float] | None:
        """The most specific history with at least `min_history` entries."""
        for key in self._keys(domain, length):
            h = self.history.get(key)
            if h is not None and len(h) >= self.min_history:
                return h
        return None

    def predict(self, domain: str, length: int) -> float:
        h = self._history(domain, length)
        return median(h) if h is not None else self.prior_s

    def long_probability(self, domain: str, length: int) -> float:
        """Fraction of similar tasks that ran past the long threshold (0 without history)."""
        h, limit = self._history(domain, length), self.threshold()
        if h is None or math.isinf(limit):
            return 0.0
        return sum(x > limit for x in h) / len(h)

    def threshold(self) -> float:
        """Seconds above which a task counts as long (inf until there is any history)."""
        if self.long_threshold_s is not None:
            return self.long_threshold_s
        h = self.history.get("*")
        if h is None or len(h) < self.min_history:
            return math.inf
        return self.long_factor * median(h)

    def is_long(self, domain: str, length: int) -> bool:
        return self.long_probability(domain, length) >= self.long_risk

    def state_dict(self) -> dict[str, Any]:
        return {"history": {k: list(v) for k, v in self.history.items()}}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.history = {k: deque((float(x) for x in v), maxlen=self.window) for k, v in d["history"].items()}
