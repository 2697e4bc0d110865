"""Figures for the comparison report, returned as base64 PNG so the HTML is self-contained.

matplotlib is imported inside each function with the non-interactive Agg backend, so the
CLI's startup never pays for it and no display is needed.
"""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path
from typing import Any, Sequence


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def forest_plot(rows: Sequence[tuple[str, float, float, float, str]], margin: float) -> str:
    """rows: (label, estimate, low, high, verdict). Regression rows are drawn red."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(rows) + 1.2))
    for i, (label, est, low, high, verdict) in enumerate(rows):
        y = len(rows) - 1 - i
        color = {"regressed": "#c0392b", "inconclusive": "#d68910", "improved": "#1e8449"}.get(verdict, "#34495e")
        if not (math.isnan(low) or math.isnan(high)):
            ax.hlines(y, low, high, color=color, lw=2)
        ax.plot([est], [y], "o", color=color)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)])
    ax.axvline(0, color="grey", lw=1)
    ax.axvline(-margin, color="#c0392b", lw=1, ls="--", label=f"-margin ({margin:g})")
    ax.set_xlabel("after - before (95% CI, clustered by task)")
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def pass_rate_bars(labels: Sequence[str], before: Sequence[float], after: Sequence[float]) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(labels) + 2), 3.2))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], before, width=0.4, label="before (A)", color="#95a5a6")
    ax.bar([x + 0.2 for x in xs], after, width=0.4, label="after (B)", color="#2e86c1")
    ax.set_xticks(list(xs), labels, rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel("pass rate")
    ax.legend(fontsize=8)
    return _png(fig)


def count_distributions(title: str, per_domain: dict[str, tuple[list[float], list[float]]]) -> str:
    """Side-by-side box plots of a count (steps, tokens) per domain, before vs after."""
    plt = _pyplot()
    names = sorted(per_domain)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(names) + 2), 3.2))
    data, pos = [], []
    for i, n in enumerate(names):
        a, b = per_domain[n]
        data += [a or [0.0], b or [0.0]]
        pos += [3 * i, 3 * i + 1]
    box = ax.boxplot(data, positions=pos, widths=0.8, patch_artist=True)
    for j, patch in enumerate(box["boxes"]):
        patch.set_facecolor("#95a5a6" if j % 2 == 0 else "#2e86c1")
    ax.set_xticks([3 * i + 0.5 for i in range(len(names))], names, rotation=20)
    ax.set_ylabel(title)
    ax.set_title(f"{title}: before (grey) vs after (blue)", fontsize=9)
    return _png(fig)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Rows of a training run's metrics.jsonl; unreadable lines are skipped (it is a log)."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "step" in obj:
            rows.append(obj)
    return rows


def training_curves(runs: dict[str, list[dict[str, Any]]]) -> str | None:
    """Reward and pass-rate curves over training steps; None when no run logged any."""
    keys = sorted({k for rows in runs.values() for r in rows for k in r
                   if ("reward" in k or "pass" in k) and isinstance(r[k], (int, float))})
    if not keys:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.0), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for label, rows in runs.items():
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if pts:
                ax.plot(*zip(*pts), label=label, lw=1.2)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("step")
        if ax.get_legend_handles_labels()[0]:  # a metric neither run logged draws nothing to label
            ax.legend(fontsize=7)
    return _png(fig)
