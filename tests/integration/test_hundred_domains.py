"""`posttrain rl examples/hundred_domains.yaml` through the real CLI, reduced to three rg-* domains (one held
out) and two RL steps on the real SmolLM2: the curriculum's levels reach the metrics and the scheduler page,
and the held-out domain is reported apart in summary.json and the printed table. Skipped without a converted
SmolLM2 (tests/unit/rollout/chat_fixtures.py) or the reasoning-gym package. The full experiment:
benchmarks/hundred_domains.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.rollout.chat_fixtures import real_smollm2_dir

ROOT = Path(__file__).resolve().parents[2]
SMOL = real_smollm2_dir()
pytestmark = pytest.mark.skipif(SMOL is None, reason="no converted SmolLM2 directory")


@pytest.mark.timeout(1500)
def test_hundred_domains_example_runs_reduced_and_reports_held_out_domains_apart(tmp_path):
    pytest.importorskip("reasoning_gym")
    sys.path.insert(0, str(ROOT))
    from benchmarks.hundred_domains import SMOKE

    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "posttrain.cli.main", "rl", "examples/hundred_domains.yaml", "--out", str(out),
                        f"model.path={SMOL}", *SMOKE], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["generalisation"]["held_out_domains"]["domains"] == ["rg-lcm"]
    assert s["generalisation"]["trained_domains"]["domains"] == ["rg-gcd", "rg-spell_backward"]
    assert "│ held out (1) " in r.stdout and "│ trained (2) " in r.stdout  # the printed table's two rows
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert any("sched/difficulty/rg-gcd" in row for row in rows)
    assert (out / "scheduler.png").is_file()
