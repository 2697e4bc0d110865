"""Paired before/after comparison of two evaluation runs, with a regression gate.

    cmp = compare_runs("runs/eval-base", "runs/eval-new", margin=0.02)
    cmp.regressions        # ["code"]: domains whose CI lower bound is below -margin
    cmp.to_dict()          # what `posttrain compare --json` prints

Samples pair by (task id, task version, epoch); the same task id with different versions
in the two runs is refused (the runs did not see the same task). Infra-error samples are
dropped together with their partner, and counted. Per domain:

- binary scores (every score is 0 or 1): exact McNemar p-value, and the difference of
  pass rates with a t interval clustered by task;
- graded scores: a task-clustered paired bootstrap for the interval and the p-value;
- Holm correction of the p-values across domains;
- paired step and token deltas with clustered intervals;
- flips (pass->fail, fail->pass) with references into both runs.

Run A is "before" (the baseline: the first argument of `posttrain compare`), run B is
"after" (the candidate). Each domain gets one verdict from the 95% interval of
(B - A) -- of the pass rate for binary scores, of the mean score for graded ones:

- improved: the interval lies above 0 and the (Holm) p-value is below alpha;
- regressed: the interval lies below 0;
- unchanged: the interval lies above -margin (any loss is smaller than the margin);
- inconclusive: the interval reaches below -margin without lying below 0, so the data
  can neither show a loss nor rule out one larger than the margin (add tasks or epochs);
- insufficient: fewer than two tasks, no interval.

The gate (`--fail-on-regression`) fails on regressed, inconclusive and insufficient: it
is a non-inferiority check, and a domain too small to bound its difference within the
margin cannot pass it. Intervals are per domain and not multiplicity-adjusted; only
p-values are (Holm).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain.eval.records import SAMPLES_FILE, EvalError, SampleRecord, load_run_records
from posttrain.eval.stats import Interval, clustered_mean_ci, holm, mcnemar_exact, paired_bootstrap, paired_delta_ci

ALL = "ALL"  # the pooled row over every domain


@dataclass
class Flip:
    task_id: str
    task_version: str
    epoch: int
    domain: str
    direction: str  # "pass->fail" | "fail->pass"
    link_a: str
    link_b: str
    completion_a: str
    completion_b: str


@dataclass
class DomainResult:
    domain: str
    method: str  # "mcnemar" | "bootstrap"
    pairs: int
    tasks: int
    pass_before: float
    pass_after: float
    score_before: float
    score_after: float
    diff: Interval  # after - before, of pass rate (binary) or mean score (graded)
    p_value: float
    p_holm: float = float("nan")
    steps: Interval | None = None
    tokens: Interval | None = None
    flips: list[Flip] = field(default_factory=list)
    verdict: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain, "method": self.method, "pairs": self.pairs, "tasks": self.tasks,
            "pass_before": self.pass_before, "pass_after": self.pass_after,
            "score_before": self.score_before, "score_after": self.score_after,
            "diff": self.diff.estimate, "ci": [self.diff.low, self.diff.high],
            "p_value": self.p_value, "p_holm": self.p_holm,
            "steps_delta": self.steps.as_dict() if self.steps else None,
            "tokens_delta": self.tokens.as_dict() if self.tokens else None,
            "flips": [f.__dict__ for f in self.flips],
            "verdict": self.verdict,
        }


@dataclass
class Comparison:
    run_a: str
    run_b: str
    margin: float
    domains: list[DomainResult]
    overall: DomainResult
    only_a: int
    only_b: int
    infra_dropped: int
    meta_a: dict[str, Any] = field(default_factory=dict)
    meta_b: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # sampling_check.py: the sides sampled differently
    pairs: list[tuple[SampleRecord, SampleRecord]] = field(default_factory=list, repr=False)

    @property
    def regressions(self) -> list[str]:
        return [d.domain for d in self.domains + [self.overall] if d.verdict == "regressed"]

    @property
    def unproven(self) -> list[str]:
        """Domains whose data cannot rule out a loss larger than the margin."""
        return [d.domain for d in self.domains + [self.overall] if d.verdict in ("inconclusive", "insufficient")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a, "run_b": self.run_b, "margin": self.margin,
            "domains": {d.domain: d.to_dict() for d in self.domains},
            "overall": {**self.overall.to_dict(), "flips": len(self.overall.flips)},  # listed per domain
            "unpaired": {"only_a": self.only_a, "only_b": self.only_b, "infra_dropped": self.infra_dropped},
            "regressions": self.regressions,
            "inconclusive": self.unproven,
            "verdict": "regressed" if self.regressions else "inconclusive" if self.unproven else "ok",
            "warnings": self.warnings,
        }


def _check_versions(a: list[SampleRecord], b: list[SampleRecord]) -> None:
    va: dict[str, set[str]] = defaultdict(set)
    vb: dict[str, set[str]] = defaultdict(set)
    for r in a:
        va[r.task_id].add(r.task_version)
    for r in b:
        vb[r.task_id].add(r.task_version)
    bad = sorted(t for t in va.keys() & vb.keys() if va[t] != vb[t])
    if bad:
        listed = "; ".join(f"{t}: {','.join(sorted(va[t]))} vs {','.join(sorted(vb[t]))}" for t in bad[:10])
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise EvalError(f"task versions differ between the runs, refusing to compare: {listed}{more}")


def pair_records(a: list[SampleRecord], b: list[SampleRecord]) -> tuple[list[tuple[SampleRecord, SampleRecord]], int, int, int]:
    """(pairs, only_a, only_b, infra_dropped), pairs sorted by key for reproducibility."""
    _check_versions(a, b)
    ma = {r.key: r for r in a}
    mb = {r.key: r for r in b}
    common = sorted(ma.keys() & mb.keys())
    pairs = [(ma[k], mb[k]) for k in common if not (ma[k].infra_error or mb[k].infra_error)]
    return pairs, len(ma.keys() - mb.keys()), len(mb.keys() - ma.keys()), len(common) - len(pairs)


def _is_binary(pairs: list[tuple[SampleRecord, SampleRecord]]) -> bool:
    return all(r.score in (0.0, 1.0) and bool(r.score) == r.passed for p in pairs for r in p)


def _flips(pairs: list[tuple[SampleRecord, SampleRecord]], run_a: str, run_b: str) -> list[Flip]:
    out = []
    for ra, rb in pairs:
        if ra.passed == rb.passed:
            continue
        out.append(Flip(ra.task_id, ra.task_version, ra.epoch, ra.domain,
                        "pass->fail" if ra.passed else "fail->pass",
                        f"{run_a}/{SAMPLES_FILE}#{ra.key}", f"{run_b}/{SAMPLES_FILE}#{rb.key}",
                        ra.completion, rb.completion))
    return out


def compare_domain(domain: str, pairs: list[tuple[SampleRecord, SampleRecord]], run_a: str, run_b: str,
                   seed: int = 0) -> DomainResult:
    clusters = [ra.task_id for ra, _ in pairs]
    pa = [float(ra.passed) for ra, _ in pairs]
    pb = [float(rb.passed) for _, rb in pairs]
    sa = [ra.score for ra, _ in pairs]
    sb = [rb.score for _, rb in pairs]
    if _is_binary(pairs):
        b = sum(1 for x, y in zip(pa, pb) if x and not y)
        c = sum(1 for x, y in zip(pa, pb) if y and not x)
        method, p = "mcnemar", mcnemar_exact(b, c)
        diff = paired_delta_ci(pa, pb, clusters)
    else:
        boot = paired_bootstrap(sa, sb, clusters, seed=seed)
        method, p, diff = "bootstrap", boot.p_value, boot.interval
    n = len(pairs)
    mean = (lambda xs: sum(xs) / n) if n else (lambda xs: float("nan"))
    return DomainResult(
        domain=domain, method=method, pairs=n, tasks=len(set(clusters)),
        pass_before=mean(pa), pass_after=mean(pb), score_before=mean(sa), score_after=mean(sb),
        diff=diff, p_value=p,
        steps=paired_delta_ci([ra.steps for ra, _ in pairs], [rb.steps for _, rb in pairs], clusters),
        tokens=paired_delta_ci([ra.tokens for ra, _ in pairs], [rb.tokens for _, rb in pairs], clusters),
        flips=_flips(pairs, run_a, run_b),
    )


def verdict(d: DomainResult, margin: float, alpha: float = 0.05) -> str:
    """improved | unchanged | inconclusive | regressed | insufficient (module docstring)."""
    if d.pairs == 0 or math.isnan(d.diff.low):
        # One task cannot bound a difference; identical outcomes still certify "no change".
        return "unchanged" if d.pairs and d.diff.estimate == 0 and not d.flips else "insufficient"
    p = d.p_holm if not math.isnan(d.p_holm) else d.p_value
    if d.diff.low > 0 and p < alpha:
        return "improved"
    if d.diff.high < 0:
        return "regressed"
    return "unchanged" if d.diff.low >= -margin else "inconclusive"


def compare_runs(run_a: str | Path, run_b: str | Path, margin: float = 0.02, seed: int = 0) -> Comparison:
    if margin < 0:
        raise EvalError(f"--margin must be >= 0, got {margin}")
    meta_a, recs_a = load_run_records(run_a)
    meta_b, recs_b = load_run_records(run_b)
    pairs, only_a, only_b, infra = pair_records(recs_a, recs_b)
    if not pairs:
        raise EvalError(f"no paired samples between {run_a} and {run_b} "
                        f"(only in A: {only_a}, only in B: {only_b}, infra errors: {infra})")
    by_domain: dict[str, list[tuple[SampleRecord, SampleRecord]]] = defaultdict(list)
    for pr in pairs:
        by_domain[pr[0].domain].append(pr)
    sa, sb = str(run_a), str(run_b)
    domains = [compare_domain(name, by_domain[name], sa, sb, seed) for name in sorted(by_domain)]
    for d, adj in zip(domains, holm([d.p_value for d in domains])):
        d.p_holm = adj
        d.verdict = verdict(d, margin)
    overall = compare_domain(ALL, pairs, sa, sb, seed)
    overall.p_holm = overall.p_value
    overall.verdict = verdict(overall, margin)
    from posttrain.eval.sampling_check import sampling_warnings

    warnings = sampling_warnings(meta_a, recs_a, meta_b, recs_b)
    return Comparison(sa, sb, margin, domains, overall, only_a, only_b, infra, meta_a, meta_b, warnings, pairs)
