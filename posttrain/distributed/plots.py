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


def _series(rows: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pts], [float(p[1]) for p in pts]


def plot_cluster(run_dir: str | Path, rows: Sequence[dict]) -> Path | None:
    """Write run_dir/cluster.png; None when the rows carry no cluster metrics."""
    keys = sorted({k for r in rows for k in r})
    if not any(k.startswith("cluster/") for k in keys):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    (tp, qd), (ro, sy) = axes
    for k in keys:
        if k.startswith("cluster/sandbox/") and k.endswith("/exec_per_s"):
            tp.plot(*_series(rows, k), lw=1, label=k.split("/")[2])
        elif k.startswith("cluster/sandbox/") and k.endswith("/failures"):
            x, y = _series(rows, k)
            if any(y):
                tp.plot(x, y, lw=1, ls=":", label=f"{k.split('/')[2]} failures")
        elif k.startswith("cluster/rollout/") and k.endswith(("/completions", "/failures")):
            parts = k.split("/")  # cluster/rollout/<node>/<worker>/<what>
            ro.plot(*_series(rows, k), lw=1, ls="-" if parts[-1] == "completions" else ":",
                    label=f"{'/'.join(parts[2:-1])} {parts[-1]}")
        elif k.startswith("cluster/sync/") and k.endswith("_s"):
            sy.plot(*_series(rows, k), lw=1, label=k.removeprefix("cluster/sync/"))
    for k, label in (("cluster/sandbox/queue_depth", "queue depth"), ("cluster/sandbox/max_queue_depth", "max so far"),
                     ("cluster/sandbox/pools_alive", "pools alive"), ("cluster/rollout/workers_alive", "workers alive")):
        if k in keys:
            qd.plot(*_series(rows, k), lw=1, label=label)
    titles = ("sandbox executions/s by node (dotted: failures)", "admission queue and live capacity",
              "rollout completions by worker (dotted: failures)", "weight sync (s)")
    for ax, title in zip((tp, qd, ro, sy), titles):
        ax.set_title(title, fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data in this run", ha="center", va="center", transform=ax.transAxes)
    for ax in (ro, sy):
        ax.set_xlabel("RL step")
    fig.tight_layout()
    path = Path(run_dir) / "cluster.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
