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
    fig.tight_layout()  # one draw; bbox_inches="tight" would draw every figure twice
    fig.savefig(buf, format="png", dpi=90)
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


def _bar_labels(ax: Any, xs: Sequence[float], ys: Sequence[float], tops: Sequence[float]) -> None:
    for x, y, top in zip(xs, ys, tops):
        if not math.isnan(y):
            ax.text(x, min(0.97, (top if not math.isnan(top) else y) + 0.02), f"{y:.2f}", ha="center", va="bottom",
                    fontsize=7)


def draw_pass_bars(ax: Any, labels: Sequence[str], before: Sequence[float], after: Sequence[float],
                   n: Sequence[int] | None = None, names: tuple[str, str] = ("before (A)", "after (B)")) -> None:
    """Grouped bars on `ax`, each value printed on its bar and, given the sample counts `n`, a
    95% Wilson interval as its error bar."""
    from posttrain.eval.stats import wilson

    xs = list(range(len(labels)))
    for off, vals, name, color in ((-0.2, before, names[0], "#95a5a6"), (0.2, after, names[1], "#2e86c1")):
        pos = [x + off for x in xs]
        tops = list(vals)
        if n is not None:
            cis = [wilson(round(v * k), k) if k and not math.isnan(v) else (math.nan, math.nan) for v, k in zip(vals, n)]
            err = [[max(0.0, v - lo) if not math.isnan(lo) else 0.0 for v, (lo, _) in zip(vals, cis)],
                   [max(0.0, hi - v) if not math.isnan(hi) else 0.0 for v, (_, hi) in zip(vals, cis)]]
            ax.bar(pos, vals, width=0.4, label=name, color=color, yerr=err, capsize=3, ecolor="#333")
            tops = [hi for _, hi in cis]
        else:
            ax.bar(pos, vals, width=0.4, label=name, color=color)
        _bar_labels(ax, pos, vals, tops)
    ax.set_xticks(xs, labels, rotation=20)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("pass rate" + (" (95% Wilson CI)" if n is not None else ""))
    ax.legend(fontsize=8)


def pass_rate_bars(labels: Sequence[str], before: Sequence[float], after: Sequence[float],
                   n: Sequence[int] | None = None, names: tuple[str, str] = ("before (A)", "after (B)")) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(labels) + 2), 3.4))
    draw_pass_bars(ax, labels, before, after, n, names)
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


def training_curves(runs: dict[str, list[dict[str, Any]]], smooth: float = 0.6, cols: int = 3) -> str | None:
    """Reward and pass-rate curves over training steps, EMA-smoothed over the faint raw line,
    `cols` panels to a row (so none runs off the page); None when no run logged any."""
    from posttrain.store.metric_pages import ema

    keys = sorted({k for rows in runs.values() for r in rows for k in r
                   if ("reward" in k or "pass" in k) and isinstance(r[k], (int, float))})
    if not keys:
        return None
    plt = _pyplot()
    cols = min(cols, len(keys))
    nrows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.0 * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(keys):]:
        fig.delaxes(ax)
    for ax, key in zip(flat, keys):
        for label, rows in runs.items():
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if pts:
                xs, ys = zip(*pts)
                w = 0.0 if key.startswith("eval/") else smooth  # evals are few, exact points
                line, = ax.plot(xs, ema(ys, w), label=label, lw=1.3, marker="o" if w == 0 else None, ms=3)
                if w:
                    ax.plot(xs, ys, lw=0.6, alpha=0.25, color=line.get_color())
        ax.set_title(key + (f" (EMA {smooth})" if not key.startswith("eval/") else ""), fontsize=9)
        ax.set_xlabel("step")
        if ax.get_legend_handles_labels()[0]:  # a metric neither run logged draws nothing to label
            ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def recipe_reward_page(path: Path, history: Sequence[dict[str, Any]], before: dict[str, float],
                       after: dict[str, float], n: dict[str, int], smooth: float = 0.6) -> Path:
    """The quickstart's reward_curve.png: training reward per domain (EMA `smooth` over the faint
    raw line) and held-out pass@1 before/after per domain, each bar with its value and a 95%
    Wilson interval over its `n` tasks."""
    from posttrain.store.metric_pages import ema

    plt = _pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for key in sorted({k for r in history for k in r if k.startswith("reward/")}):
        pts = [(r["step"], r[key]) for r in history if isinstance(r.get(key), (int, float))]
        if pts:
            xs, ys = zip(*pts)
            line, = a.plot(xs, ema(ys, smooth), lw=1.4, label=key.split("/", 1)[1])
            a.plot(xs, ys, lw=0.6, alpha=0.25, color=line.get_color())
    a.set_xlabel("RL step"), a.set_ylabel("mean reward"), a.set_title(f"training reward (EMA {smooth}; faint: raw)")
    if a.get_legend_handles_labels()[0]:  # a run with no RL step has no curve to label
        a.legend(fontsize=8)
    doms = sorted(before)
    draw_pass_bars(b, doms, [before[d] for d in doms], [after.get(d, math.nan) for d in doms],
                   n=[n.get(d, 0) for d in doms], names=("before RL", "after RL"))
    b.set_title("held-out pass@1 (values, 95% Wilson intervals)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
