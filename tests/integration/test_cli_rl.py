"""The real `posttrain rl` CLI on the tiny model: run directory contents, resume, bad input."""

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from posttrain.testing import cli_fork

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
SMALL = ["tasks.domains.arithmetic.n_train=60", "tasks.domains.code.n_train=60", "tasks.domains.arithmetic.n_eval=10",
         "tasks.domains.code.n_eval=10", "sft.steps=10", "rl.prompts_per_step=4", "rl.group_size=4", "engine.name=hf"]


def run_cli(*args, timeout=600):
    # `timeout` guards against a hang only (no test here asserts on speed): a run that takes 60 s on a
    # quiet machine took over 120 s at load average 15, and failed a deadline that measured nothing.
    return cli_fork.run_cli(list(args), cwd=ROOT, timeout=timeout)


def metric_steps(run_dir):
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_rl_three_steps_writes_the_run_directory(tmp_path):
    out = tmp_path / "run"
    r = run_cli("rl", "examples/tiny_rl.yaml", "rl.steps=3", "rl.checkpoint_every=1", *SMALL, "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("config.yaml", "metrics.jsonl", "trajectories.sqlite", "reward_curve.png", "summary.json"):
        assert (out / name).is_file(), name
    assert metric_steps(out) == [0, 1, 2]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(r["mem/peak_gib"] >= r["mem/rss_gib"] > 0 for r in rows)  # each step's memory, for the report
    assert (out / "checkpoints" / "step-2" / "config.json").is_file()
    assert any(p.name.startswith("events.out.tfevents") for p in (out / "tb").iterdir())
    rows = sqlite3.connect(out / "trajectories.sqlite").execute("SELECT COUNT(*), COUNT(DISTINCT step) FROM trajectories").fetchone()
    assert rows == (3 * 4 * 4, 3)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= {"before", "after", "p_value", "n_tasks", "wall_s"}
    assert set(summary["before"]["domains"]) == {"arithmetic", "code"}
    assert "<title>posttrain rl</title>" in (out / "report.html").read_text()  # titled by its command


def test_interrupted_run_resumes_without_duplicated_or_missing_steps(tmp_path):
    out = tmp_path / "run"
    # 40 steps: on a quiet machine a tiny step takes ~0.05 s, and with 5 steps the run could
    # finish before the interrupt landed (the race this test must not depend on).
    args = CLI + ["rl", "examples/tiny_rl.yaml", "rl.steps=40", "rl.checkpoint_every=100", *SMALL, "--out", str(out)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600  # a hang guard: the loop leaves as soon as two steps are logged
    while time.time() < deadline:  # stop it once step index 1 (the 2nd step) is logged
        if (out / "metrics.jsonl").is_file() and len(metric_steps(out)) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    assert proc.returncode != 0
    done = metric_steps(out)
    assert 2 <= len(done) < 40
    r = run_cli("rl", "examples/tiny_rl.yaml", "--resume", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert metric_steps(out) == list(range(40))
    steps = [s for (s,) in sqlite3.connect(out / "trajectories.sqlite").execute("SELECT DISTINCT step FROM trajectories ORDER BY step")]
    assert steps == list(range(40))
    segments = json.loads((out / "wall.json").read_text())["segments_s"]
    assert len(segments) == 2  # the interrupted segment and the resumed one
    assert segments[0] < json.loads((out / "summary.json").read_text())["wall_s"] <= sum(segments)  # both segments


@pytest.mark.parametrize("args,expect", [
    (["rl", "examples/tiny_rl.yaml", "rl.stepz=3"], "unknown config key 'rl.stepz'"),
    (["rl", "examples/tiny_rl.yaml", "rl.steps=lots"], "bad value for config key 'rl.steps'"),
    (["rl", "missing.yaml"], "config file not found: missing.yaml"),
    (["rl", "examples/tiny_rl.yaml", "model.path=/nonexistent/model"], "model directory not found: /nonexistent/model"),
])
def test_bad_input_is_one_line_without_traceback(args, expect):
    r = run_cli(*args)
    assert r.returncode == 2
    assert expect in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_recipe_rl_minutes_ends_rl_on_wall_time_before_rl_steps(tmp_path):
    """recipe.rl.rl_minutes (equal-wall-time comparisons): the loop stops at the first step past the budget."""
    out = tmp_path / "run"
    r = run_cli("rl", "examples/tiny_rl.yaml", "rl.steps=500", "rl.checkpoint_every=0", "recipe.rl.rl_minutes=0.0001",
                "eval.before=false", "eval.after=false", *SMALL, "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert metric_steps(out) == [0]  # 6 ms of budget: one step, then the budget is spent
    assert (out / "checkpoints").is_dir() and any((out / "checkpoints").iterdir())  # the end is saved
