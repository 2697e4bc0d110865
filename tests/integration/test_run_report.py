"""An honest quickstart run, end to end at toy size: report.html is self-contained and complete,
no reward-hacking detector alarms, and the viewer's API reads the run."""

from __future__ import annotations

import re

import pytest

SMALL = ["sft.steps=20", "recipe.rl.stop_at_pass=null", "rl.steps=10", "rl.prompts_per_step=4", "rl.group_size=4",
         "tasks.domains.arithmetic.n_train=200", "tasks.domains.code.n_train=200", "tasks.domains.arithmetic.n_eval=12",
         "tasks.domains.code.n_eval=12", "log.detect_every=5", "threads=1"]  # ~10 s of CPU


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from posttrain.config import load_config
    from posttrain.recipes.quickstart import QUICKSTART_DEFAULTS, run_quickstart

    d = tmp_path_factory.mktemp("qs") / "run"
    run_quickstart(load_config(None, SMALL, base=QUICKSTART_DEFAULTS), d)
    return d


def test_report_is_self_contained(run_dir):
    html = (run_dir / "report.html").read_text()
    assert "src='http" not in html and "href='http" not in html and "<script" not in html
    assert html.count("data:image/png;base64,") >= 3  # bars, curves, scheduler


def test_report_has_every_section(run_dir):
    html = (run_dir / "report.html").read_text()
    for heading in ("Held-out pass@1, before and after", "Curves", "Flips", "Reward-hacking detectors"):
        assert f"<h2>{heading}" in html


def test_report_table_carries_intervals_and_p_values(run_dir):
    html = (run_dir / "report.html").read_text()
    assert re.search(r"<td>arithmetic</td><td>12</td><td>\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]</td>", html)
    assert "McNemar p" in html


def test_no_detector_alarms_on_the_honest_run(run_dir):
    from posttrain.eval.plots import read_metrics

    rows = read_metrics(run_dir / "metrics.jsonl")
    alarms = {k: v for r in rows for k, v in r.items() if k.startswith("detect/") and not k.endswith("/score") and v}
    assert any(k.startswith("detect/") for k in rows[-1])  # the loop logged them (log.detect_every=5)
    assert alarms == {}
    assert "ALARM" not in (run_dir / "report.html").read_text()


def test_eval_files_keep_completions_for_the_flips(run_dir):
    import json

    before = json.loads((run_dir / "eval_before.json").read_text())
    assert set(before["completions"]) == set(before["passed"])


def test_viewer_reads_the_quickstart_run(run_dir):
    from fastapi.testclient import TestClient

    from posttrain.view.app import create_app

    c = TestClient(create_app([run_dir]))
    page = c.get("/api/runs/0/trajectories?limit=5").json()
    assert page["total"] == 10 * 4 * 4
    one = page["rows"][0]
    t = c.get(f"/api/runs/0/trajectory/train/{one['step']}/{one['grp']}/{one['sample']}").json()
    assert t["prompt"] and len(t["turns"][0]["pieces"]) == len(t["turns"][0]["logprobs"])
    assert c.get("/api/runs/0/eval").json()["kind"] == "before_after"
