"""Trained domains vs held-out domains (never trained on): does what RL taught transfer?

    g = generalisation(before, after, held_out=["rg-gcd", "rg-lcm"])
    g["held_out_domains"]["delta"], g["held_out_domains"]["ci95"]   # transfer, with a task-bootstrap CI
    g["trained_domains"]["delta"]                                     # the lift where RL trained

Each group's pass@1 is the mean over its domains (as the run's headline is), its delta the mean
paired per-task change (after - before) with a 95% cluster-bootstrap interval (tasks resampled;
`eval/stats.paired_bootstrap`), and its exact McNemar p over the group's tasks. A held-out domain
is one the config marks `held_out: true`: `make_splits` gives it only held-out tasks.
"""

from __future__ import annotations

from typing import Any, Sequence

from posttrain.eval.stats import mcnemar_exact, paired_bootstrap


def _group(before: Any, after: Any, domains: Sequence[str], seed: int = 0) -> dict[str, Any]:
    common = [t for t in before.passed if t in after.passed and before.domain_of[t] in domains]
    b = [float(before.passed[t]) for t in common]
    a = [float(after.passed[t]) for t in common]
    boot = paired_bootstrap(b, a, common, resamples=2000, seed=seed)
    per = {d: (before.pass_at_1(d), after.pass_at_1(d)) for d in domains}
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {
        "domains": list(domains), "n_tasks": len(common),
        "before": mean([v[0] for v in per.values()]), "after": mean([v[1] for v in per.values()]),
        "delta": boot.interval.estimate, "ci95": [boot.interval.low, boot.interval.high],
        "p_value": mcnemar_exact(sum(x > y for x, y in zip(b, a)), sum(y > x for x, y in zip(b, a))),
    }


def generalisation(before: Any, after: Any, held_out: Sequence[str]) -> dict[str, Any]:
    """{"trained_domains": {...}, "held_out_domains": {...}} from two `HeldoutResult`s."""
    every = sorted(set(before.domain_of.values()))
    held = [d for d in every if d in set(held_out)]
    trained = [d for d in every if d not in set(held_out)]
    return {"trained_domains": _group(before, after, trained), "held_out_domains": _group(before, after, held)}
