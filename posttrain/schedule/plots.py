"""The scheduler's page of the run report: `scheduler.png` from a run's metrics.jsonl rows.

    plot_scheduler(run_dir, metrics.read())

Four panels over RL steps: sampling weight by domain (dashed: difficulty buckets), observed
pass rate by domain, dropped (zero-variance) group fraction, and, when the long-tail lanes
ran, queue waits and staleness. Keys are the ones `Scheduler.metrics()` and
`LongTailRunner.metrics()` write (`sched/...`, `queue/...`); a panel with no data says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def _series(rows: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    pts = [(r["step"], r[key]) for r in rows if key in r and r[key] is not None]
    return [p[0] for p in pts], [float(p[1]) for p in pts]


def plot_scheduler(run_dir: str | Path, rows: Sequence[dict]) -> Path | None:
    """Write run_dir/scheduler.png; None when the rows carry no scheduler metrics."""
    keys = sorted({k for r in rows for k in r})
    if not any(k.startswith("sched/") for k in keys):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    (wt, pr), (dr, qu) = axes
    for k in keys:
        if k.startswith("sched/weight/"):
            name = k.removeprefix("sched/weight/")
            wt.plot(*_series(rows, k), lw=1, ls="--" if "/bucket" in name else "-", label=name)
        elif k.startswith("sched/pass_rate/"):
            pr.plot(*_series(rows, k), lw=1, label=k.removeprefix("sched/pass_rate/"))
    for k, label in (("sched/dropped_frac", "this step"), ("sched/dropped_frac_total", "cumulative"),
                     ("sched/zero_weight_frac", "tasks at zero weight")):
        if k in keys:
            dr.plot(*_series(rows, k), lw=1, label=label)
    queue = [k for k in keys if k.startswith(("queue/wait_p50_s/", "queue/staleness_mean"))]
    for k in queue:
        qu.plot(*_series(rows, k), lw=1, label=k.removeprefix("queue/"))
    if not queue:
        qu.text(0.5, 0.5, "no long-tail queue in this run", ha="center", va="center", transform=qu.transAxes)
    titles = ("sampling weight by domain (dashed: difficulty buckets)", "observed pass rate by domain",
              "dropped zero-variance groups", "queue wait p50 (s) and staleness (versions)")
    for ax, title in zip((wt, pr, dr, qu), titles):
        ax.set_title(title, fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in (dr, qu):
        ax.set_xlabel("RL step")
    fig.tight_layout()
    path = Path(run_dir) / "scheduler.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
