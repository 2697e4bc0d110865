"""Where a run's zero-variance groups came from: per domain, of every group drawn (issue 39; seconds).

    .venv/bin/python benchmarks/zero_variance_breakdown.py runs/hundred_domains/curriculum-seed0

Reads RUN/trajectories.sqlite (every group drawn, refill rounds included: the groups a step dropped
are stored with the trained ones) and prints, per domain, the groups drawn and the fraction whose
rewards were all equal; then the split the domain-share simulation takes as input: the "edge"
domains (at least `--min-groups` groups drawn and a signal rate of at least `--edge-rate`) against
the rest, each with its share of the draws and its signal rate, and the `domain_shares_sim.py`
command that replays a run with those rates. Drawing only from the edge domains would leave their own
zero-variance fraction: the floor no split across domains can go under.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.store.trajectories import TrajectoryStore  # noqa: E402


def groups_by_domain(run: Path) -> tuple[dict[str, list[bool]], int]:
    """({domain: [group had signal, ...]} over every group the run drew (kind 'train'), RL steps)."""
    rewards: dict[tuple[int, int], list[float]] = collections.defaultdict(list)
    domain: dict[tuple[int, int], str] = {}
    store = TrajectoryStore(run / "trajectories.sqlite")
    try:
        for t in store.iter():
            key = (t.step, t.group)
            rewards[key].append(float(t.reward or 0.0))
            domain[key] = t.domain
    finally:
        store.close()
    out: dict[str, list[bool]] = collections.defaultdict(list)
    for key, rs in rewards.items():
        out[domain[key]].append(max(rs) != min(rs))
    return dict(out), len({step for step, _ in rewards})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a run directory (with trajectories.sqlite)")
    ap.add_argument("--edge-rate", type=float, default=0.3, help="signal rate from which a domain counts as edge")
    ap.add_argument("--min-groups", type=int, default=10, help="groups drawn from which a domain can count as edge")
    ap.add_argument("--top", type=int, default=15, help="domains listed")
    a = ap.parse_args()
    if not (a.run / "trajectories.sqlite").is_file():
        sys.exit(f"{a.run}: no trajectories.sqlite (not a run directory, or a run that drew nothing)")
    by, steps = groups_by_domain(a.run)
    n = sum(len(v) for v in by.values())
    flat = sum(len(v) - sum(v) for v in by.values())
    print(f"{a.run}: {n} groups drawn in {steps} steps over {len(by)} domains, zero-variance {flat / n:.3f} of them")
    print(f"{'domain':<32}{'groups':>8}{'share':>8}{'zero-variance':>15}")
    for d, v in sorted(by.items(), key=lambda kv: -len(kv[1]))[: a.top]:
        print(f"{d:<32}{len(v):>8}{len(v) / n:>8.3f}{1 - sum(v) / len(v):>15.3f}")
    edge = {d for d, v in by.items() if len(v) >= a.min_groups and sum(v) / len(v) >= a.edge_rate}
    e = [s for d, v in by.items() if d in edge for s in v]
    r = [s for d, v in by.items() if d not in edge for s in v]
    rate = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    print(f"edge ({len(edge)} domains, >= {a.min_groups} groups, signal >= {a.edge_rate}): "
          f"{len(e) / n:.3f} of the draws, signal {rate(e):.3f} (their own zero-variance {1 - rate(e):.3f}: the floor of any split across domains)")
    print(f"the other {len(by) - len(edge)}: {len(r) / n:.3f} of the draws, signal {rate(r):.3f}")
    print(f"replay: .venv/bin/python benchmarks/domain_shares_sim.py --domains {len(by)} --edge {len(edge)} "
          f"--edge-signal {rate(e):.2f} --dead-signal {rate(r):.2f} --n {round(n / steps)} --steps {steps}")


if __name__ == "__main__":
    main()
