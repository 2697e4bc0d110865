"""cluster.png from metrics rows: written for a cluster run, skipped for a local one."""

from __future__ import annotations

from posttrain.distributed.plots import plot_cluster


def _rows():
    rows = []
    for step in range(4):
        dead = step >= 2  # node b's worker dies at step 2
        rows.append({"step": step, "reward/mean": 0.5,
                     "cluster/sandbox/pt_node_a/exec_per_s": 40.0 + step, "cluster/sandbox/pt_node_b/exec_per_s": 20.0,
                     "cluster/sandbox/pt_node_b/failures": float(dead), "cluster/sandbox/queue_depth": 3.0,
                     "cluster/sandbox/pools_alive": 2.0, "cluster/rollout/workers_alive": 1.0 if dead else 2.0,
                     "cluster/rollout/pt_node_a/w0/completions": 16.0 * (step + 1),
                     "cluster/rollout/pt_node_b/w1/completions": 16.0 * min(step + 1, 2),
                     "cluster/rollout/pt_node_b/w1/failures": float(dead), "cluster/sync/total_s": 0.02})
    return rows


def test_cluster_run_gets_a_png(tmp_path):
    path = plot_cluster(tmp_path, _rows())
    assert path == tmp_path / "cluster.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_local_run_gets_no_cluster_page(tmp_path):
    assert plot_cluster(tmp_path, [{"step": 0, "reward/mean": 0.5}]) is None
    assert not (tmp_path / "cluster.png").exists()
