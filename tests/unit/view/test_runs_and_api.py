"""A run as the viewer reads it while it grows, and the HTTP API's answers."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from posttrain.view.app import create_app
from posttrain.eval.stats import wilson
from posttrain.view.runs import RunView
from posttrain.testing.synthetic_runs import write_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("api") / "run", steps=6, groups=3, group_size=4, seed=5)


@pytest.fixture(scope="module")
def client(run_dir):
    return TestClient(create_app([run_dir]))


def test_metrics_read_picks_up_appended_rows(tmp_path):
    run = RunView(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "a": 1}) + "\n")
    assert len(run.metrics()) == 1
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 1, "a": 2}) + "\n")
    assert [r["step"] for r in run.metrics()] == [0, 1]


def test_metrics_read_waits_for_a_line_still_being_written(tmp_path):
    run = RunView(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n" + '{"step": 1, "a"')
    assert len(run.metrics()) == 1
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write(': 3}\n')
    assert [r.get("a") for r in run.metrics()] == [None, 3]


def test_metrics_read_starts_over_after_a_truncating_resume(tmp_path):
    run = RunView(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": i}) + "\n" for i in range(5)))
    run.metrics()
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    assert [r["step"] for r in run.metrics()] == [0]


def test_a_run_without_a_store_answers_empty(tmp_path):
    c = TestClient(create_app([tmp_path]))
    assert c.get("/api/runs/0/trajectories").json()["total"] == 0
    assert c.get("/api/runs/0/curves").json() == {"metrics": [], "reward": {}, "derived": []}


def test_trajectory_carries_prompt_pieces_and_sandbox_result(client):
    t = client.get("/api/runs/0/trajectories?domain=code&limit=1").json()["rows"][0]
    d = client.get(f"/api/runs/0/trajectory/train/{t['step']}/{t['grp']}/{t['sample']}").json()
    assert d["prompt"].startswith("[user] Write f(x)")
    assert d["turns"][1]["exec_result"]["stdout"] == "1 passed\n"
    last = d["turns"][-1]
    assert "".join(last["pieces"]) == last["text"] and len(last["pieces"]) == len(last["logprobs"])


def test_bad_filter_is_a_400_naming_it(client):
    r = client.get("/api/runs/0/trajectories?reward_min=high")
    assert r.status_code == 400 and "bad filter" in r.json()["detail"]


def test_unknown_run_is_a_404(client):
    assert client.get("/api/runs/7/curves").status_code == 404


def test_missing_trajectory_is_a_404(client):
    assert client.get("/api/runs/0/trajectory/train/99/0/0").status_code == 404


def test_index_and_every_asset_are_served_from_the_package(client):
    html = client.get("/").text
    for asset in ("plot.js", "app.js", "traj.js", "evalview.js", "style.css"):
        assert f"/static/{asset}" in html
        assert client.get(f"/static/{asset}").status_code == 200
    assert "http://" not in html and "https://" not in html  # no CDN


def test_eval_flips_carry_their_prompts(client):
    e = client.get("/api/runs/0/eval").json()
    assert e["kind"] == "before_after" and e["flips"]
    assert all(f["prompt"] for f in e["flips"])


def test_nan_is_sent_as_null(client, run_dir):
    (run_dir / "metrics.jsonl").open("a").write(json.dumps({"step": 99, "x": float("nan")}) + "\n")
    rows = client.get("/api/runs/0/curves").json()["metrics"]
    assert rows[-1] == {"step": 99, "x": None}


def test_wilson_interval_stays_in_unit_range():
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    lo, hi = wilson(5, 10)
    assert lo < 0.5 < hi


def test_curves_and_pages_follow_a_growing_run(tmp_path):
    from posttrain.store.trajectories import TrajectoryStore
    from posttrain.types import Trajectory, Turn, VerifyResult

    d = write_run(tmp_path / "live", steps=3, groups=2, group_size=2, seed=1)
    c = TestClient(create_app([d]))
    assert c.get("/api/runs/0/curves").json()["reward"]["ALL"]["step"] == [0, 1, 2]
    store = TrajectoryStore(d / "trajectories.sqlite")  # the trainer, still writing
    store.put_many([Trajectory("arithmetic-1", "v1", "arithmetic", (1,), (Turn("assistant", "7", (1,), (-0.1,)),),
                               reward=1.0, verify=VerifyResult(1.0, True), step=3, group=0, sample=s) for s in range(2)],
                   advantages=[0.0, 0.0])
    store.close()
    assert c.get("/api/runs/0/curves").json()["reward"]["ALL"]["step"] == [0, 1, 2, 3]
    assert c.get("/api/runs/0/trajectories?step_min=3&adv_min=-9").json()["total"] == 2


def test_advantage_filter_equals_filtering_the_plain_page(client):
    plain = {(r["step"], r["grp"], r["sample"]): r["advantage"]
             for r in client.get("/api/runs/0/trajectories?limit=500").json()["rows"]}
    kept = {(r["step"], r["grp"], r["sample"]): r["advantage"]
            for r in client.get("/api/runs/0/trajectories?limit=500&adv_min=0.1").json()["rows"]}
    assert kept and kept == {k: a for k, a in plain.items() if a is not None and a >= 0.1}


def test_verifier_throughput_is_derived_per_step(client):
    derived = client.get("/api/runs/0/curves").json()["derived"]
    assert [d["step"] for d in derived] == list(range(6))
    assert derived[0]["throughput/verified_per_s"] == pytest.approx(3 * 4 / 0.2)  # 12 samples, verify 0.2 s


def test_two_eval_runs_compare_with_prompts_on_their_flips(tmp_path):
    from tests.unit.eval.conftest import _planted
    from tests.unit.eval.conftest import write_run as write_eval_run

    a, b = write_eval_run(tmp_path / "a", _planted(None)), write_eval_run(tmp_path / "b", _planted("code"))
    c = TestClient(create_app([a, b]))
    cmp = c.get("/api/compare?a=0&b=1").json()
    assert cmp["verdict"] == "regressed"
    flips = cmp["domains"]["code"]["flips"]
    assert flips and all(f["prompt"] == f"prompt {f['task_id']}" for f in flips)
    assert c.get("/api/runs/0/eval").json()["kind"] == "suite"
