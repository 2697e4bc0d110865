"""What a run directory holds, read for the report and the viewer (no web or plotting code).

    rewards = reward_by_step(q)        # domain -> per-step mean reward with a 95% band (q: RunQueries)
    prompts = pinned_prompts(run_dir)  # task id -> prompt text, from run_dir/tasks/*.jsonl
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from posttrain.store.run import RunDir
from posttrain.store.run_queries import as_queries


def pinned_prompts(run_dir: str | Path) -> dict[str, str]:
    """Every pinned task's prompt, its messages as "[role] content" paragraphs; {} for a run
    that pinned none."""
    out: dict[str, str] = {}
    for f in sorted(RunDir(run_dir).tasks.glob("*.jsonl")):
        for line in f.read_text(errors="replace").splitlines():
            try:
                t = json.loads(line)
            except ValueError:
                continue
            msgs = t.get("prompt") or []
            out[t.get("id", "")] = "\n\n".join(f"[{m.get('role', '')}] {m.get('content', '')}" for m in msgs
                                               if isinstance(m, dict))
    return out


def reward_by_step(db: Any, kind: str = "train") -> dict[str, dict[str, list[float]]]:
    """domain -> {"step", "mean", "low", "high", "n"}: per-step mean reward of scored samples with
    a normal 95% interval (mean +- 1.96 s / sqrt(n), clipped to the rewards' own range);
    "ALL" pools the domains. `db`: a RunQueries (RunView.db(), RunDir.queries())."""
    q = as_queries(db)
    out: dict[str, dict[str, list[float]]] = {}
    # a band never leaves the range the rewards themselves span (a normal interval would dip
    # below 0 for a pass rate near 0)
    lo_r, hi_r = q.reward_range(kind)
    for step, dom, n, mean, sq in q.reward_moments(kind):
        s = out.setdefault(dom, {"step": [], "mean": [], "low": [], "high": [], "n": []})
        var = max(0.0, sq - mean * mean) * n / max(1, n - 1)
        half = 1.96 * (var / n) ** 0.5 if n > 1 else 0.0
        low, high = max(lo_r, mean - half), min(hi_r, mean + half)
        for k, v in (("step", step), ("mean", mean), ("low", low), ("high", high), ("n", n)):
            s[k].append(v)
    return out
