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

from posttrain.store.metric_pages import four_panels, metric_keys, save_page, series


def plot_scheduler(run_dir: str | Path, rows: Sequence[dict]) -> Path | None:
    """Write run_dir/scheduler.png; None when the rows carry no scheduler metrics."""
    keys = metric_keys(rows)
    if not any(k.startswith("sched/") for k in keys):
        return None
    plt, fig, axes = four_panels()
    (wt, pr), (dr, qu) = axes
    for k in keys:
        if k.startswith("sched/weight/"):
            name = k.removeprefix("sched/weight/")
            wt.plot(*series(rows, k), lw=1, ls="--" if "/bucket" in name else "-", label=name)
        elif k.startswith("sched/pass_rate/"):
            pr.plot(*series(rows, k), lw=1, label=k.removeprefix("sched/pass_rate/"))
    for k, label in (("sched/dropped_frac", "this step"), ("sched/dropped_frac_total", "cumulative"),
                     ("sched/zero_weight_frac", "tasks at zero weight")):
        if k in keys:
            dr.plot(*series(rows, k), lw=1, label=label)
    queue = [k for k in keys if k.startswith(("queue/wait_p50_s/", "queue/staleness_mean"))]
    for k in queue:
        qu.plot(*series(rows, k), lw=1, label=k.removeprefix("queue/"))
    if not queue:
        qu.text(0.5, 0.5, "no long-tail queue in this run", ha="center", va="center", transform=qu.transAxes)
    titles = ("sampling weight by domain (dashed: difficulty buckets)", "observed pass rate by domain",
              "dropped zero-variance groups", "queue wait p50 (s) and staleness (versions)")
    return save_page(plt, fig, axes, titles, Path(run_dir) / "scheduler.png")
