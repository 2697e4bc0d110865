"""The recipe's report: held-out pass@1 before and after RL per domain, with 95% intervals and
the paired McNemar p-value, as `report.md` in the run directory (summary.json holds the same).

    ci = wilson(k, n)                          # (low, high)
    add_intervals(summary, before, after)      # summary["before"]["ci95"][domain] = [low, high]
    path = write_report(run_dir, summary)      # run_dir/report.md

Wilson intervals, not normal ones: held-out sets here are small and pass rates near 0 or 1,
where a normal interval collapses to a point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrain.eval.stats import wilson
from posttrain.store.run import SUMMARY


def _interval(res: Any, domain: str) -> list[float]:
    vals = [p for tid, p in res.passed.items() if res.domain_of[tid] == domain]
    return list(wilson(sum(vals), len(vals)))


def add_intervals(summary: dict, before: Any, after: Any) -> dict:
    """Per-domain Wilson intervals and task counts into the summary's before/after sections."""
    for key, res in (("before", before), ("after", after)):
        doms = summary[key]["domains"]
        summary[key]["ci95"] = {d: _interval(res, d) for d in doms}
        summary[key]["n"] = {d: sum(res.domain_of[t] == d for t in res.passed) for d in doms}
    return summary


def write_report(run_dir: Path, summary: dict, model: str = "") -> Path:
    """A markdown page: one row per domain, then the mean; what was sampled and how long it took."""
    b, a = summary["before"], summary["after"]
    ev = summary.get("eval", {})
    how = "greedy" if not ev.get("temperature") else f"T={ev['temperature']}, seed {ev.get('seed')}"
    lines = [f"# Run report{f': {model}' if model else ''}", "",
             f"Held-out pass@1 ({how}, one sample per task), 95% Wilson intervals, paired exact McNemar test.", "",
             "| domain | n | before | after | delta | McNemar p |", "|---|---:|---:|---:|---:|---:|"]
    for d, pb in b["domains"].items():
        pa = a["domains"][d]
        lo, hi = b.get("ci95", {}).get(d, [float("nan")] * 2)
        lo2, hi2 = a.get("ci95", {}).get(d, [float("nan")] * 2)
        lines.append(f"| {d} | {b.get('n', {}).get(d, '')} | {pb:.3f} [{lo:.3f}, {hi:.3f}] | "
                     f"{pa:.3f} [{lo2:.3f}, {hi2:.3f}] | {pa - pb:+.3f} | {summary['domain_p_values'][d]:.3g} |")
    lines.append(f"| **mean** | {summary['n_tasks']} | {b['pass@1']:.3f} | {a['pass@1']:.3f} | "
                 f"{a['pass@1'] - b['pass@1']:+.3f} | {summary['p_value']:.3g} |")
    for key, label in (("trained_domains", "trained domains"), ("held_out_domains", "held-out domains (never trained on)")):
        g = summary.get("generalisation", {}).get(key)
        if g:
            lines.append(f"| **{label}** ({len(g['domains'])}) | {g['n_tasks']} | {g['before']:.3f} | {g['after']:.3f} | "
                         f"{g['delta']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}] | {g['p_value']:.3g} |")
    f = summary["flips"]
    infra = summary["infra_errors"]
    lines += ["", f"Flips: fail->pass {f['fail_to_pass']}, pass->fail {f['pass_to_fail']}. Infra errors "
              f"(kept out): before {infra['before']}, after {infra['after']}. Wall {summary['wall_s']:.0f} s.", "",
              f"Training curve: `reward_curve.png`; every number: `{SUMMARY}`."]
    path = Path(run_dir) / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
