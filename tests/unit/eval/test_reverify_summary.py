"""Suite summaries (infra errors kept apart) and verifier flake rates from re-scoring."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from pathlib import Path

import pytest
import yaml

from posttrain.eval.records import RecordFile, SampleRecord
from posttrain.eval.reverify import reverify_run
from posttrain.eval.summary import summarize
from posttrain.eval.trajio import trajectory_from_dict, trajectory_to_dict
from posttrain.registry import verifier
from posttrain.types import Message, Spec, Task, Trajectory, Turn, VerifyResult

_calls: dict[int, itertools.count] = {}


@verifier("eval_test_coin", answer_format="line")
class Coin:
    """Flaky on purpose: alternates its verdict on every call for the same trajectory."""

    async def __call__(self, task, traj, ctx):
        n = next(_calls.setdefault(id(traj), itertools.count()))
        return VerifyResult(1.0, True) if n % 2 else VerifyResult(0.0, False)


@verifier("eval_test_steady", answer_format="line")
class Steady:
    async def __call__(self, task, traj, ctx):
        return VerifyResult(1.0, True)


def rec(tid: str, epoch: int, passed: bool, infra: bool = False, score: float | None = None) -> SampleRecord:
    return SampleRecord(tid, "v", "d", epoch, 0, "p", "c", float(passed) if score is None else score, passed,
                        "infra_error" if infra else "ok", steps=2, tokens=5)


def test_infra_errors_are_reported_apart_not_as_failures():
    recs = [rec("a", 0, True), rec("a", 1, False, infra=True), rec("b", 0, True), rec("b", 1, True)]
    s = summarize(recs, epochs=2)["overall"]
    assert s["pass@1"] == 1.0 and s["infra_errors"] == 1 and s["infra_rate"] == 0.25


def test_pass_at_k_is_nan_for_tasks_short_of_k():
    recs = [rec("a", 0, True), rec("a", 1, False, infra=True), rec("b", 0, False), rec("b", 1, True)]
    s = summarize(recs, epochs=2)["overall"]
    assert s["tasks_short"]["2"] == 1 and s["pass@k"]["2"] == 1.0  # only task b counts at k=2


def test_summary_score_ci_is_clustered_by_task():
    recs = [rec(t, e, p) for t, ps in (("a", (1, 1)), ("b", (0, 0)), ("c", (1, 0))) for e, p in enumerate(ps)]
    sc = summarize(recs, epochs=2)["overall"]["score"]
    assert sc["estimate"] == 0.5 and sc["se"] == pytest.approx(math.sqrt(1 / 12)) and sc["clusters"] == 3


def test_trajectory_round_trips_through_json():
    t = Trajectory("a", "v", "d", (1, 2), (Turn("assistant", "42", (5, 6), (-0.1, -0.2), token_versions=(3, 4)),),
                   verify=VerifyResult(1.0, True, {"x": 1}))
    back = trajectory_from_dict(json.loads(json.dumps(trajectory_to_dict(t))))
    assert back == t


def _run_dir(tmp_path: Path, verifier_name: str, old: VerifyResult | None = None) -> Path:
    tasks = [Task(f"t{i}", "d", (Message("user", f"q{i}"),), Spec(verifier_name)) for i in range(3)]
    from posttrain.tasks.io import save_tasks

    save_tasks(tasks, tmp_path / "tasks.jsonl")
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(
        {"name": "flaky", "tasks": [{"file": "tasks.jsonl", "pins": {t.id: t.version for t in tasks}}]}))
    run = tmp_path / "run"
    recs = []
    for t in tasks:
        for e in range(2):
            traj = Trajectory(t.id, t.version, "d", (), (Turn("assistant", "7"),), verify=old, sample=e)
            recs.append(SampleRecord(t.id, t.version, "d", e, 0, "p", "7", 1.0, True, "ok",
                                     trajectory=trajectory_to_dict(traj)))
    RecordFile(run / "samples.jsonl").append(recs)
    (run / "meta.json").write_text(json.dumps({"suite_path": str(tmp_path / "suite.yaml")}))
    return run


def test_reverify_finds_a_flaky_verifier(tmp_path):
    report = asyncio.run(reverify_run(_run_dir(tmp_path, "eval_test_coin"), n=3))
    assert report["flaky_samples"] == 6 and report["tasks"]["t0"]["flake_rate"] == 1.0


def test_reverify_steady_verifier_has_no_flakes(tmp_path):
    report = asyncio.run(reverify_run(_run_dir(tmp_path, "eval_test_steady"), n=3))
    assert report["flake_rate"] == 0.0 and report["samples"] == 6


def test_replay_shows_what_todays_verifier_changed(tmp_path):
    from posttrain.eval.replay import diff_lines, replay_run

    run = _run_dir(tmp_path, "eval_test_steady", old=VerifyResult(0.0, False, reason="old checker"))
    diffs = asyncio.run(replay_run(run, task_id="t1"))
    assert len(diffs) == 2 and all(d.changed_fields == ["passed", "score", "reason"] for d in diffs)
    assert "    passed: false -> true" in diff_lines(diffs)


def test_replay_reports_tasks_it_cannot_find(tmp_path):
    from posttrain.eval.replay import replay_run

    run = _run_dir(tmp_path, "eval_test_steady")
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(
        {"name": "other", "tasks": [{"domain": "arithmetic", "n": 1, "seed": 1}]}))
    diffs = asyncio.run(replay_run(run))
    assert all("task version not found" in d.note for d in diffs)


def test_replay_training_run_from_trajectory_store(tmp_path):
    store_mod = pytest.importorskip("posttrain.store.trajectories")
    from posttrain.config import dump_config, load_config
    from posttrain.eval.replay import replay_run
    from posttrain.tasks import generate_domain

    cfg = load_config(None, ["tasks.domains={arithmetic: {n_train: 3, n_eval: 1}}", "seed=0"])
    dump_config(cfg, tmp_path / "config.yaml")
    tasks = generate_domain("arithmetic", 3, 0, 1.0)
    store = store_mod.TrajectoryStore(tmp_path / "trajectories.sqlite")
    store.put_many([Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", t.oracle),), step=s, group=g,
                               verify=VerifyResult(0.0, False, reason="old")) for s in (1, 2) for g, t in enumerate(tasks)])
    store.close()
    diffs = asyncio.run(replay_run(tmp_path, step=2, task_id=tasks[0].id))
    assert len(diffs) == 1 and diffs[0].new["passed"] is True and "passed" in diffs[0].changed_fields
