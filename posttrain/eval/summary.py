"""Suite metrics from sample records: pass@1, pass@k, pass^k, mean score with a clustered CI.

    s = summarize(records, epochs=5)
    s["overall"]["pass@k"]["5"], s["domains"]["code"]["score"]["low"], s["tasks"]["code-3"]["steps"]

Infra-error samples are counted (`infra_errors`, `infra_rate`) and excluded from every
rate: a sandbox outage must not look like a model regression. pass@k and pass^k are pooled
by eval/core.py, the same code the in-loop held-out eval uses: the mean over tasks of the
per-task unbiased estimators; tasks with fewer than k judged samples give NaN and are left
out of the mean (`tasks_short[k]` counts them), and the mean is NaN when every task is short.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from posttrain.eval.core import Verdict, mean_pass_at_k, mean_pass_hat_k, mean_score, tallies
from posttrain.eval.records import SampleRecord
from posttrain.eval.stats import clustered_mean_ci, proportion_ci


def ks_for(epochs: int) -> list[int]:
    """1, 2, 4, ... up to and including `epochs`."""
    ks, k = [], 1
    while k < epochs:
        ks.append(k)
        k *= 2
    return sorted(set(ks + [max(1, epochs)]))


def _verdict(r: SampleRecord) -> Verdict:
    """A record's verdict, as eval/core.verdict judged its trajectory when it was recorded."""
    return Verdict(r.passed, r.score, r.infra_error)


def _group(records: list[SampleRecord], epochs: int) -> dict[str, Any]:
    judged = [r for r in records if not r.infra_error]
    by_task = tallies((r.task_id, _verdict(r)) for r in records)  # eval/core.py
    out: dict[str, Any] = {
        "samples": len(records), "judged": len(judged), "tasks": len({r.task_id for r in records}),
        "infra_errors": len(records) - len(judged),
        "infra_rate": (len(records) - len(judged)) / len(records) if records else float("nan"),
        "pass@k": {}, "pass^k": {}, "tasks_short": {},
    }
    for k in ks_for(epochs):
        out["pass@k"][str(k)], out["tasks_short"][str(k)] = mean_pass_at_k(by_task, k)
        out["pass^k"][str(k)] = mean_pass_hat_k(by_task, k)
    out["pass@1"] = out["pass@k"]["1"]
    out["score"] = clustered_mean_ci([r.score for r in judged], [r.task_id for r in judged]).as_dict()
    out["pass_rate"] = proportion_ci([float(r.passed) for r in judged], [r.task_id for r in judged]).as_dict()
    n = len(judged)
    out["steps"] = sum(r.steps for r in judged) / n if n else float("nan")
    out["tokens"] = sum(r.tokens for r in judged) / n if n else float("nan")
    return out


def summarize(records: Iterable[SampleRecord], epochs: int) -> dict[str, Any]:
    recs = list(records)
    by_domain: dict[str, list[SampleRecord]] = defaultdict(list)
    by_task: dict[str, list[SampleRecord]] = defaultdict(list)
    for r in recs:
        by_domain[r.domain].append(r)
        by_task[r.task_id].append(r)
    tasks = {}
    for tid, rs in sorted(by_task.items()):
        judged = [r for r in rs if not r.infra_error]
        n = len(judged)
        tasks[tid] = {
            "domain": rs[0].domain, "version": rs[0].task_version, "samples": len(rs), "judged": n,
            "passes": sum(r.passed for r in judged), "infra_errors": len(rs) - n,
            "mean_score": mean_score([_verdict(r) for r in rs]),
            "steps": sum(r.steps for r in judged) / n if n else float("nan"),
            "tokens": sum(r.tokens for r in judged) / n if n else float("nan"),
        }
    return {
        "overall": _group(recs, epochs),
        "domains": {d: _group(rs, epochs) for d, rs in sorted(by_domain.items())},
        "tasks": tasks,
    }


def sampling_line(run: dict[str, Any]) -> str:
    """What decided the samples, in words: `greedy, 1 epoch, budget 24 tokens` or
    `temperature 0.7 (top_p 1.0), 2 epochs, budget 24 tokens, seed 0`."""
    sp = run.get("sampling") or {}
    t = float(sp.get("temperature", 0.0))
    how = "greedy" if t == 0 else f"temperature {t:g} (top_p {float(sp.get('top_p', 1.0)):g}, seed {run.get('suite_seed', 0)})"
    epochs = run.get("epochs", 1)
    parts = [how, f"{epochs} epoch{'s' if epochs != 1 else ''}", f"budget {sp.get('max_new_tokens', '?')} tokens"]
    if run.get("limit"):
        parts.append(f"--limit {run['limit']} (seed {run.get('limit_seed', 0)})")
    return "sampling: " + ", ".join(parts)


def summary_table(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the per-domain table: pass@k and pass^k only when epochs > 1 (at one
    epoch they equal pass@1), steps only when some task took more than one."""
    k = list(summary["overall"]["pass@k"])[-1]  # the largest k: epochs
    at_k = [f"pass@{k}", f"pass^{k}"] if k != "1" else []
    rows = list(summary["domains"].items()) + [("ALL", summary["overall"])]
    multi = any(g["steps"] == g["steps"] and g["steps"] != 1.0 for _, g in rows)  # NaN != NaN: no judged sample
    head = ["domain", "tasks", "n", "pass@1", *at_k, "score [95% CI]", *(["steps"] if multi else []), "tokens", "infra"]
    out = []
    for name, g in rows:
        sc = g["score"]
        ks = [f"{g['pass@k'][k]:.3f}", f"{g['pass^k'][k]:.3f}"] if at_k else []
        out.append([name, str(g["tasks"]), str(g["samples"]), f"{g['pass@1']:.3f}", *ks,
                    f"{sc['estimate']:.3f} [{sc['low']:.2f}, {sc['high']:.2f}]",
                    *([f"{g['steps']:.2f}"] if multi else []), f"{g['tokens']:.1f}",
                    f"{g['infra_errors']} ({g['infra_rate']:.0%})"])
    return head, out


NOTE = "Infra errors are excluded from every rate; pass@k/pass^k are unbiased (NaN when n < k)."


def summary_markdown(summary: dict[str, Any], title: str) -> str:
    head, rows = summary_table(summary)
    lines = [f"## {title}", ""]
    if "run" in summary:
        lines += [sampling_line(summary["run"]), ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    lines.append("\n" + NOTE)
    return "\n".join(lines)
