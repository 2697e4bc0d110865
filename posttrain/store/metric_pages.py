"""Shared frame of the run report's metric pages (scheduler.png, cluster.png, ...).

    keys = metric_keys(rows)                       # every key any metrics.jsonl row carries
    plt, fig, axes = four_panels()                 # 2 x 2, shared step axis
    ax.plot(*series(rows, "sched/dropped_frac"))
    save_page(plt, fig, axes, titles, Path(run_dir) / "scheduler.png", empty="no data in this run")

A page module decides what to draw; this one holds what every page does the same way:
reading a key's (step, value) points, the figure, titles and legends, the step label on
the bottom row, and writing the PNG headless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def metric_keys(rows: Sequence[dict]) -> list[str]:
    return sorted({k for r in rows for k in r})


def series(rows: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of `key` over the rows that carry it (None skipped)."""
    pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pts], [float(p[1]) for p in pts]


def four_panels() -> tuple[Any, Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    return plt, fig, axes


def save_page(plt: Any, fig: Any, axes: Any, titles: Sequence[str], path: Path, empty: str | None = None) -> Path:
    """Title each panel (row-major), add legends, label the bottom row's step axis, write `path`.
    With `empty`, a panel that drew nothing says so."""
    flat = [ax for row in axes for ax in row]
    for ax, title in zip(flat, titles):
        ax.set_title(title, fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        elif empty is not None:
            ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes)
    for ax in axes[-1]:
        ax.set_xlabel("RL step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def ema(values: Sequence[float], weight: float = 0.6) -> list[float]:
    """Bias-corrected exponential moving average (TensorBoard's smoothing); weight 0 = raw."""
    out, acc = [], 0.0
    for n, v in enumerate(values, 1):
        acc = acc * weight + (1 - weight) * v
        out.append(acc / (1 - weight ** n) if weight > 0 else v)
    return out


def varies(ys: Sequence[float], tol: float = 1e-9) -> bool:
    """Whether a series is anything but a flat line (a flat one teaches nothing: drop its panel)."""
    return bool(ys) and max(ys) - min(ys) > tol


def panel_grid(n: int, cols: int = 2) -> tuple[Any, Any, list[Any]]:
    """(plt, fig, axes) with exactly n panels, `cols` to a row: no empty panel, none cut off."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = max(1, min(cols, n))
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.2 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        fig.delaxes(ax)
    return plt, fig, flat[:n]


def save_panels(plt: Any, fig: Any, axes: Sequence[Any], titles: Sequence[str], path: Path,
                xlabel: str = "RL step") -> Path:
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
