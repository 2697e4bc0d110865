"""RunDir: every path of a run directory, named once (posttrain/store/run.py)."""

from __future__ import annotations

import json

from posttrain.store.run import RunDir, checkpoint_step
from posttrain.store.run_dir import claim_run_dir, newest_checkpoint
from posttrain.types import Trajectory, Turn, VerifyResult


def test_the_files_sit_at_the_documented_names(tmp_path):
    r = RunDir(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in (r.config, r.metrics, r.summary, r.trajectories, r.report,
                                                         r.tasks, r.tensorboard, r.postmortem)] == \
        ["config.yaml", "metrics.jsonl", "summary.json", "trajectories.sqlite", "report.html", "tasks", "tb",
         "postmortem"]


def test_a_checkpoint_is_checkpoints_step_n(tmp_path):
    r = RunDir(tmp_path)
    assert (r.checkpoint(7), r.checkpoint_tmp(7), r.dcp_checkpoint(7)) == (
        tmp_path / "checkpoints" / "step-7", tmp_path / "checkpoints" / ".tmp-step-7",
        tmp_path / "checkpoints" / "dcp-step-7")


def test_checkpoint_step_reads_only_step_n_names():
    assert [checkpoint_step(n) for n in ("step-12", "step-x", ".tmp-step-3", "dcp-step-3", "step-")] == \
        [12, None, None, None, None]


def test_newest_checkpoint_is_numerically_newest(tmp_path):
    r = RunDir(tmp_path)
    for s in (2, 9, 10):
        r.checkpoint(s).mkdir(parents=True)
    r.checkpoint_tmp(11).mkdir()  # half-written: not a checkpoint
    assert r.newest_checkpoint() == (10, r.checkpoint(10))


def test_a_run_without_checkpoints_has_none(tmp_path):
    assert RunDir(tmp_path).checkpoint_steps() == [] and RunDir(tmp_path).newest_checkpoint() is None


def test_claim_and_newest_checkpoint_agree_with_rundir(tmp_path):
    d = claim_run_dir(tmp_path / "run")
    RunDir(d).checkpoint(3).mkdir(parents=True)
    assert newest_checkpoint(d) == RunDir(d).newest_checkpoint()


def test_is_run_means_config_yaml(tmp_path):
    r = RunDir(tmp_path)
    before = r.is_run()
    r.config.write_text("name: x\n")
    assert (before, r.is_run()) == (False, True)


def test_read_summary_is_none_unless_a_json_object(tmp_path):
    r = RunDir(tmp_path)
    got = [r.read_summary()]
    for text in ("{torn", "[1, 2]", json.dumps({"wall_s": 3})):
        r.summary.write_text(text)
        got.append(r.read_summary())
    assert got == [None, None, None, {"wall_s": 3}]


def test_queries_is_none_before_the_store_exists(tmp_path):
    with RunDir(tmp_path).queries() as q:
        assert q is None


def test_queries_read_what_the_store_wrote(tmp_path):
    r = RunDir(tmp_path)
    store = r.store()
    store.put_many([Trajectory("t", "v", "d", (1,), (Turn("assistant", "7", (1,), (-0.1,)),), reward=1.0,
                               verify=VerifyResult(1.0, True), step=0, group=0, sample=0)], advantages=[0.5])
    store.close()
    with r.queries() as q:
        assert q.stamp()[0] == 1


def test_queries_never_write(tmp_path):
    r = RunDir(tmp_path)
    r.store().close()
    with r.queries() as q:
        try:
            q.con.execute("DELETE FROM trajectories")
        except Exception as e:  # noqa: BLE001 - any refusal will do; what matters is that it refused
            refused = "readonly" in str(e).replace("-", "").replace(" ", "").lower()
        else:
            refused = False
    assert refused
