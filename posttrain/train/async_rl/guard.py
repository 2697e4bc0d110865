"""The asynchronous run's guard against trainer-vs-engine drift (rl.offpolicy.max_kl / action).

    guard = DriftGuard(cfg.rl.offpolicy)
    text = guard.observe(step, row)     # may return a warning, or raise OffPolicyDriftExceeded

It reads `train/offpolicy/kl`, the k3 estimate of KL(behaviour || trainer) over the step's
trained tokens, which grows with staleness, with a learning rate too high for the staleness,
and with any numeric drift between the engine and the trainer. Above `max_kl` it warns once
per `WINDOW` steps while the drift lasts (like infra_guard.py) or stops the run with one line.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from posttrain.errors import PosttrainError

log = logging.getLogger("posttrain")
WINDOW = 10


class OffPolicyDriftExceeded(PosttrainError):
    """The trainer's logprobs left the engine's by more than rl.offpolicy.max_kl (action=stop)."""


class DriftGuard:
    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg  # OffPolicyConfig: max_kl, action
        self._warned_at: int | None = None
        self.warnings: list[str] = []

    def observe(self, step: int, row: dict[str, float]) -> str | None:
        kl = row.get("train/offpolicy/kl")
        if kl is None or kl <= self.cfg.max_kl:
            return None
        msg = (f"RL step {step}: trainer-vs-engine KL {kl:.3g} is above rl.offpolicy.max_kl={self.cfg.max_kl} "
               f"(mean |dlogp| {row.get('train/offpolicy/logp_abs_diff', float('nan')):.3g}, staleness "
               f"{row.get('async/staleness', 0):.0f}): lower rl.lr or rl.max_staleness, or check the engine's logprobs")
        if self.cfg.action == "stop":
            raise OffPolicyDriftExceeded(f"{msg}; the run stopped (set rl.offpolicy.action=warn to carry on)")
        if self._warned_at is None or step - self._warned_at >= WINDOW:
            self._warned_at = step
            text = f"WARNING {msg}"
            print(f"posttrain: {text}", file=sys.stderr, flush=True)
            log.warning(text)
            self.warnings.append(text)
            return text
        return None
