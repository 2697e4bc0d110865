"""benchmarks/zero_variance_breakdown.py: every group a run drew, by domain, from a real trajectory store."""

import subprocess
import sys
from pathlib import Path

from posttrain.store.trajectories import TrajectoryStore
from posttrain.types import Trajectory

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.zero_variance_breakdown import groups_by_domain  # noqa: E402


def _run(tmp_path: Path) -> Path:
    # (step, group, domain, rewards): a group the refill dropped is stored like a trained one
    groups = [(0, 0, "rg-a", [1.0, 0.0]), (0, 1, "rg-b", [0.0, 0.0]), (1, 0, "rg-a", [1.0, 1.0]),
              (1, 1, "rg-a", [0.0, 1.0])]
    store = TrajectoryStore(tmp_path / "trajectories.sqlite")
    store.put_many([Trajectory(f"t{s}{g}", "1", d, (), (), reward=r, step=s, group=g, sample=k)
                    for s, g, d, rs in groups for k, r in enumerate(rs)])
    store.close()
    return tmp_path


def test_each_group_counts_once_with_whether_its_rewards_differed(tmp_path):
    by, steps = groups_by_domain(_run(tmp_path))
    assert by == {"rg-a": [True, False, True], "rg-b": [False]} and steps == 2


def test_the_edge_domains_own_zero_variance_is_printed_as_the_floor(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "zero_variance_breakdown.py"), str(_run(tmp_path)),
                        "--min-groups", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "4 groups drawn in 2 steps over 2 domains, zero-variance 0.500" in r.stdout
    assert "edge (1 domains, >= 2 groups, signal >= 0.3): 0.750 of the draws, signal 0.667" in r.stdout
    assert "--domains 2 --edge 1 --edge-signal 0.67 --dead-signal 0.00 --n 2 --steps 2" in r.stdout


def test_a_directory_without_a_store_is_named(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "zero_variance_breakdown.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and f"{tmp_path}: no trajectories.sqlite" in r.stderr
