"""How domain shares change the zero-variance fraction on a simulated learner (issue 39; seconds, numpy only).

    .venv/bin/python benchmarks/domain_shares_sim.py

A run of `--steps` steps of `--n` groups over `--domains` domains, of which `--edge` carry signal with
probability `--edge-signal` per group (the model's edge) and the rest with `--dead-signal` (hopeless or
solved). Four ways to split a step across domains, on the same seeds:
- `mixture`: fixed equal shares (schedule.domain_shares=mixture);
- `proportional`: shares = posterior mean signal rate (the first design, not shipped);
- `signal`: Thompson sampling on the same posterior (schedule.domain_shares=signal, schedule/domain_shares.py);
- `signal-eb`: the same Thompson draws with an empirical-Bayes prior instead of Jeffreys' (a candidate, not
  shipped): every domain's prior mean is the pooled signal rate of the domains seen so far, worth EB_STRENGTH
  groups, so with most domains hopeless an unseen one is tried less eagerly.
Prints the mean zero-variance fraction over all steps and over the second half, per mode, averaged
over `--seeds` seeds. The defaults mirror SmolLM2-135M on examples/hundred_domains.yaml: 91 trained
domains, ~8 at its edge (the binary-answer ones, which carry signal in nearly every group).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.schedule.domain_shares import SignalShares  # noqa: E402
from posttrain.schedule.sampling import allocate  # noqa: E402

EB_STRENGTH = 2.0  # pseudo-groups behind the empirical-Bayes prior


class EmpiricalBayesShares(SignalShares):
    """Thompson shares whose Beta prior is fitted to the domains seen so far (candidate; module doc)."""

    def _winners(self, k: int, mixture, rng: np.random.Generator) -> np.ndarray:
        seen = (self.signal + self.flat) > 0  # [D]
        s, f = self.signal[seen].sum(), self.flat[seen].sum()
        m = float(np.clip((s + 0.5) / (s + f + 1.0), 0.02, 0.98))  # pooled rate, Jeffreys-smoothed
        theta = rng.beta(self.signal + EB_STRENGTH * m, self.flat + EB_STRENGTH * (1 - m), size=(k, len(self.signal)))
        return np.argmax(theta * np.asarray(mixture, dtype=float), axis=1)


def run(mode: str, seed: int, a: argparse.Namespace) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    p = np.full(a.domains, a.dead_signal)
    p[: a.edge] = a.edge_signal  # [D] P(a group of the domain carries signal)
    shares = EmpiricalBayesShares(a.domains) if mode == "signal-eb" else SignalShares(a.domains)
    mix = [1.0] * a.domains
    zv = []
    for _ in range(a.steps):
        if mode in ("signal", "signal-eb"):
            counts = shares.allocate(a.n, mix, rng)
        else:
            counts = allocate(a.n, mix if mode == "mixture" else shares.rates().tolist(), rng)
        domains = np.repeat(np.arange(a.domains), counts)  # [n]
        signal = rng.random(a.n) < p[domains]
        for d, s in zip(domains, signal):
            shares.observe(int(d), bool(s))
        zv.append(1.0 - float(signal.mean()))
    return float(np.mean(zv)), float(np.mean(zv[len(zv) // 2:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--domains", type=int, default=91)
    ap.add_argument("--edge", type=int, default=8)
    ap.add_argument("--edge-signal", type=float, default=0.9)
    ap.add_argument("--dead-signal", type=float, default=0.02)
    ap.add_argument("--steps", type=int, default=78, help="78: what a 30-minute run made on 2 cores")
    ap.add_argument("--n", type=int, default=8, help="groups a step")
    ap.add_argument("--seeds", type=int, default=50)
    a = ap.parse_args()
    print(f"{a.domains} domains, {a.edge} at the edge (signal {a.edge_signal}), the rest {a.dead_signal}; "
          f"{a.steps} steps of {a.n} groups; mean over {a.seeds} seeds")
    print(f"{'mode':<14}{'zero-variance, all steps':>26}{'second half':>14}")
    for mode in ("mixture", "proportional", "signal", "signal-eb"):
        res = np.array([run(mode, s, a) for s in range(a.seeds)])  # [seeds, 2]
        print(f"{mode:<14}{res[:, 0].mean():>26.3f}{res[:, 1].mean():>14.3f}")


if __name__ == "__main__":
    main()
