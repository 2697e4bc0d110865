"""`posttrain rl` with a curriculum on `arithmetic` (a built-in domain numbered by seed and index), through
the real CLI on the tiny built-in model: the run starts, trains each step at its domain's current level,
and the untrained model's zero pass rate moves the level down one step at a time. One run (~20 s on
2 cores) shared by the tests; each test checks one property of it."""

import json
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
# start at the top level; 2 groups x 4 samples = 8 rewards a step, a decision after every step
ARGS = ["tasks.domains={arithmetic: {n_train: 30, n_eval: 4}}", "sft.steps=0", "rl.steps=4", "rl.prompts_per_step=2",
        "rl.group_size=4", "rl.checkpoint_every=0", "eval.before=false", "eval.after=false", "log.detect_every=0",
        "schedule.curriculum={levels: [0, 1, 2], start: 2, band: [0.2, 0.8], window: 8, min_evidence: 8}"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("curriculum") / "run"
    r = run_cli(["rl", "examples/tiny_rl.yaml", "--out", str(out), *ARGS],
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return out


def _rows(out):
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]


def _trained_levels(out):
    """The level suffix of the task ids each step's trajectories were drawn at ({step: {"L2"}})."""
    got: dict[int, set[str]] = {}
    for step, tid in sqlite3.connect(out / "trajectories.sqlite").execute("SELECT step, task_id FROM trajectories"):
        got.setdefault(step, set()).add(tid.rsplit("@", 1)[1])
    return got


def test_each_step_draws_only_from_the_domains_current_level(run):
    assert _trained_levels(run) == {0: {"L2"}, 1: {"L1"}, 2: {"L0"}, 3: {"L0"}}


def test_a_pass_rate_under_the_band_moves_the_level_down_until_the_lowest(run):
    rows = _rows(run)
    assert [r["sched/difficulty/arithmetic"] for r in rows] == [1.0, 0.0, 0.0, 0.0]  # the level after each step
    assert all(r["sched/level_pass/arithmetic"] < 0.2 for r in rows)  # the untrained model solves nothing


def test_the_pinned_train_and_held_out_splits_share_no_task(run):
    tasks = {name: [json.loads(x) for x in (run / "tasks" / f"{name}.jsonl").read_text().splitlines() if x.strip()]
             for name in ("train", "heldout")}
    assert not {t["id"] for t in tasks["train"]} & {t["id"] for t in tasks["heldout"]}
    assert not {t["prompt"][-1]["content"] for t in tasks["train"]} & {t["prompt"][-1]["content"] for t in tasks["heldout"]}


def test_the_viewer_serves_the_curriculum_curves(run):
    from posttrain.view.app import create_app

    rows = TestClient(create_app([run])).get("/api/runs/0/curves").json()["metrics"]
    assert all("sched/difficulty/arithmetic" in r and "sched/level_pass/arithmetic" in r for r in rows)


def test_the_run_report_draws_the_levels(run):
    assert (run / "scheduler.png").is_file()


def test_replay_finds_the_task_of_every_stored_trajectory_at_every_level(run):
    r = run_cli(["replay", str(run)], cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "32 trajectories re-verified, 0 changed" in r.stdout  # 4 steps x 2 groups x 4 samples, none unfound
