"""The cluster's page of the run report: `cluster.png` from a run's metrics.jsonl rows.

    plot_cluster(run_dir, metrics.read())      # None when the run used no cluster

Four panels over RL steps, from the keys RaySandbox and RemoteEngine write
(`cluster/sandbox/...`, `cluster/rollout/...`, `cluster/sync/...`): sandbox executions per
second by node, the driver's admission queue depth, rollout completions and failures by
worker (a dead node shows as its failures rising and the workers-alive line dropping),
and the weight-sync time. No Ray here: it reads numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from posttrain.store.metric_pages import four_panels, metric_keys, save_page, series


def plot_cluster(run_dir: str | Path, rows: Sequence[dict]) -> Path | None:
    """Write run_dir/cluster.png; None when the rows carry no cluster metrics."""
    keys = metric_keys(rows)
    if not any(k.startswith("cluster/") for k in keys):
        return None
    plt, fig, axes = four_panels()
    (tp, qd), (ro, sy) = axes
    for k in keys:
        if k.startswith("cluster/sandbox/") and k.endswith("/exec_per_s"):
            tp.plot(*series(rows, k), lw=1, label=k.split("/")[2])
        elif k.startswith("cluster/sandbox/") and k.endswith("/failures"):
            x, y = series(rows, k)
            if any(y):
                tp.plot(x, y, lw=1, ls=":", label=f"{k.split('/')[2]} failures")
        elif k.startswith("cluster/rollout/") and k.endswith(("/completions", "/failures")):
            parts = k.split("/")  # cluster/rollout/<node>/<worker>/<what>
            ro.plot(*series(rows, k), lw=1, ls="-" if parts[-1] == "completions" else ":",
                    label=f"{'/'.join(parts[2:-1])} {parts[-1]}")
        elif k.startswith("cluster/sync/") and k.endswith("_s"):
            sy.plot(*series(rows, k), lw=1, label=k.removeprefix("cluster/sync/"))
    for k, label in (("cluster/sandbox/queue_depth", "queue depth"), ("cluster/sandbox/max_queue_depth", "max so far"),
                     ("cluster/sandbox/pools_alive", "pools alive"), ("cluster/rollout/workers_alive", "workers alive")):
        if k in keys:
            qd.plot(*series(rows, k), lw=1, label=label)
    titles = ("sandbox executions/s by node (dotted: failures)", "admission queue and live capacity",
              "rollout completions by worker (dotted: failures)", "weight sync (s)")
    return save_page(plt, fig, axes, titles, Path(run_dir) / "cluster.png", empty="no data in this run")
