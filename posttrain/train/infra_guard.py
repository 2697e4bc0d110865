"""The RL run's guard against training on through an infrastructure outage.

    guard = InfraErrorGuard(cfg.rl.infra_error, sandbox)
    guard.observe(trajs)        # after every verification round; may warn or raise

It keeps the last `window` verifications (one per trajectory). Once it holds at least
`min_samples` and the infra-error share reaches `threshold`, it either warns loudly
(stderr and the `posttrain` logger, once per `window` new verifications while the rate
stays high) or raises `InfraErrorRateExceeded`, a one-line error naming the cause:

    sandbox: 45% of the last 200 verifications were infra errors (warm slot died 12 times,
    last error: warm slot failed: EOFError ...); set rl.infra_error.action=warn to carry on

Every verification of a full window an infra error stops the run whatever `action` says:
nothing was judged, so nothing can be learned. Infra-error samples never enter the gradient either way; the guard is about a run that
would otherwise finish "successfully" having learned from a fraction of its data.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter, deque
from typing import Any, Sequence

from posttrain.errors import PosttrainError
from posttrain.types import Trajectory

log = logging.getLogger("posttrain")


class InfraErrorRateExceeded(PosttrainError):
    """Too many verifications could not be judged (rl.infra_error.action=stop)."""


class InfraErrorGuard:
    def __init__(self, cfg: Any, sandbox: Any = None) -> None:
        self.cfg = cfg  # InfraErrorConfig: window, threshold, min_samples, action
        self.sandbox = sandbox
        self.window: deque[tuple[bool, str, str]] = deque(maxlen=cfg.window)  # (infra?, boundary, reason)
        self.seen = 0
        self._warned_at: int | None = None
        self.warnings: list[str] = []

    def rate(self) -> float:
        return sum(x[0] for x in self.window) / max(1, len(self.window))

    def observe(self, trajs: Sequence[Trajectory]) -> str | None:
        """Record one round; returns the warning it gave (None when the rate is fine)."""
        for t in trajs:
            if t.verify is None:
                continue
            infra = t.infra_error
            self.window.append((infra, t.error.boundary if infra and t.error else "", t.verify.reason if infra else ""))
            self.seen += 1
        if len(self.window) < self.cfg.min_samples or self.rate() < self.cfg.threshold:
            return None
        msg = self.message()
        if len(self.window) == self.window.maxlen and self.rate() >= 1.0:  # a full window, nothing judged: no learning
            raise InfraErrorRateExceeded(f"{msg}; the run stopped: not one verification could be judged")
        if self.cfg.action == "stop":
            raise InfraErrorRateExceeded(f"{msg}; the run stopped (set rl.infra_error.action=warn to carry on)")
        if self._warned_at is None or self.seen - self._warned_at >= self.cfg.window:
            self._warned_at = self.seen
            text = f"WARNING {msg}; training goes on without these samples (set rl.infra_error.action=stop to stop)"
            print(f"posttrain: {text}", file=sys.stderr, flush=True)
            log.warning(text)
            self.warnings.append(text)
            return text
        return None

    def message(self) -> str:
        infra = [x for x in self.window if x[0]]
        boundary = Counter(b for _, b, _ in infra).most_common(1)[0][0] if infra else ""
        where = "sandbox" if boundary in ("sandbox", "verifier", "") else boundary
        reason = Counter(r for _, _, r in infra).most_common(1)[0][0][:160] if infra else ""
        parts = [f"{where}: {self.rate():.0%} of the last {len(self.window)} verifications were infra errors"]
        stats = getattr(self.sandbox, "stats", None)
        pool = stats() if callable(stats) else {}
        cause = []
        if pool.get("slot_deaths"):
            cause.append(f"warm slot died {pool['slot_deaths']} times, last error: {pool.get('last_slot_error', '')[:160]}")
        if pool.get("starved_timeouts"):
            cause.append(f"{pool['starved_timeouts']} timeouts starved by host overload")
        cause.append(f"most common reason: {reason}")
        return f"{parts[0]} ({'; '.join(cause)})"
