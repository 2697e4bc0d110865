"""How a step's prompts are split across domains: the config's fixed mixture, or Thompson draws on signal.

    shares = SignalShares(n_domains)
    counts = shares.allocate(n, mixture, rng)  # [D] prompts per domain for this draw
    shares.observe(d, has_signal(group))       # one group of domain d: did its rewards differ?
    p = shares.win_probability(mixture)        # [D] each domain's expected share of a draw (metrics)
    shares.reset(d)                            # d changed level (curriculum): what it taught is stale

`schedule.domain_shares: mixture` (the default) gives each domain exactly its mixture share of every
batch: a task policy such as `learning_signal` only moves draws between the tasks of one domain. With
a hundred domains of which a handful sit at the model's edge, that pins nine of ten groups on domains
where every sample fails, whatever the policy says (issue 39: 0.905 of groups zero-variance on
SmolLM2-135M with 91 reasoning-gym domains).

`schedule.domain_shares: signal` treats the domains as the arms of a bandit whose payoff is "this
group carried signal" (its rewards were not all equal: a gradient). Each domain keeps a Beta(PRIOR,
PRIOR) posterior over that rate, its counts decayed by DECAY every time the domain is observed again
(a memory of ~1 / (1 - DECAY) groups, so a domain that starts to learn, or that the model solves, is
re-rated within a few groups). Each prompt slot of a draw goes to the domain with the highest sampled
rate times its mixture weight (Thompson sampling): domains at the model's edge take most slots, an
unseen domain's wide posterior gets it tried early, and a hopeless or solved one still wins a slot
now and then, in proportion to its posterior's chance of being best. Proportional shares (mixture x
posterior mean) were not enough: each of ~80 hopeless domains keeps a floor, and together they kept
most draws (docs/benchmarks.md, "A hundred domains"). Counts reset when the curriculum moves a
domain's level, since the new level's rate is unknown.

Does not: re-probe a domain on a clock. A domain that looked hopeless keeps its tight posterior until
it wins a slot again, which is rare once the edge domains are known.

Pure bookkeeping over an explicit generator (the scheduler's per-draw stream); `state_dict()` holds the
counts, so a resumed run draws the same batches.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from posttrain.errors import ConfigError

MODES = ("mixture", "signal")
PRIOR = 0.5  # Beta(1/2, 1/2), Jeffreys' prior on the rate a domain's groups carry signal
DECAY = 0.9  # per observed group of the domain: memory ~10 groups
MC_SAMPLES = 512  # Thompson draws behind win_probability (metrics only; a fixed generator)


class SignalShares:
    def __init__(self, n_domains: int) -> None:
        self.signal = np.zeros(n_domains)  # [D] decayed count of groups with signal
        self.flat = np.zeros(n_domains)  # [D] decayed count of zero-variance groups

    def observe(self, d: int, signal: bool) -> None:
        self.signal[d] = DECAY * self.signal[d] + float(signal)
        self.flat[d] = DECAY * self.flat[d] + float(not signal)

    def reset(self, d: int) -> None:
        self.signal[d] = self.flat[d] = 0.0

    def rates(self) -> np.ndarray:
        """[D] posterior mean of P(a group of the domain carries signal)."""
        return (self.signal + PRIOR) / (self.signal + self.flat + 2 * PRIOR)

    def _winners(self, k: int, mixture: Sequence[float], rng: np.random.Generator) -> np.ndarray:
        """[k] the domain each of k Thompson draws picks."""
        theta = rng.beta(self.signal + PRIOR, self.flat + PRIOR, size=(k, len(self.signal)))  # [k, D]
        return np.argmax(theta * np.asarray(mixture, dtype=float), axis=1)

    def allocate(self, n: int, mixture: Sequence[float], rng: np.random.Generator) -> list[int]:
        """[D] prompts per domain for a draw of n: one Thompson draw per prompt slot."""
        if n <= 0:
            return [0] * len(self.signal)
        return np.bincount(self._winners(n, mixture, rng), minlength=len(self.signal)).tolist()

    def win_probability(self, mixture: Sequence[float]) -> list[float]:
        """[D] the expected share of a draw per domain (MC over MC_SAMPLES draws, seeded by the counts alone)."""
        rng = np.random.default_rng(0)
        wins = np.bincount(self._winners(MC_SAMPLES, mixture, rng), minlength=len(self.signal))
        return (wins / MC_SAMPLES).tolist()

    def state_dict(self) -> dict[str, Any]:
        return {"signal": self.signal.tolist(), "flat": self.flat.tolist()}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        if len(d["signal"]) != len(self.signal) or len(d["flat"]) != len(self.flat):
            raise ConfigError(f"domain-share state has {len(d['signal'])} domains, this run {len(self.signal)}")
        self.signal = np.asarray(d["signal"], dtype=float)
        self.flat = np.asarray(d["flat"], dtype=float)
