"""The detectors inside the RL loop only report: live_findings reads the run directory and
returns Finding records; train/rl.py turns them into metrics and run warnings."""

from __future__ import annotations

import inspect

from posttrain.eval.detectors import Finding
from posttrain.eval.detectors import live
from posttrain.registry import registry
from posttrain.store.run import RunDir
from posttrain.testing.synthetic_runs import write_run


def test_live_findings_return_one_finding_per_detector(tmp_path):
    d = write_run(tmp_path / "r", steps=4, groups=2, group_size=4, seed=0)
    rows = [{"step": s, "reward/mean": 0.5} for s in range(4)]
    fs = live.live_findings(RunDir(d), rows, step=3)
    assert sorted(f.detector for f in fs) == sorted(registry("detector").names())


def test_live_findings_before_the_first_step_alarm_on_nothing(tmp_path):
    assert not any(f.alarm for f in live.live_findings(RunDir(tmp_path), [], step=0))


def test_live_findings_take_no_trainer_state():
    assert list(inspect.signature(live.live_findings).parameters) == ["run", "metrics", "step"]


def test_a_finding_names_its_warning_once_per_detector():
    f = Finding("universal_completion", True, 0.4, 0.2, "one text wins 4 of 10 tasks")
    assert (f.warning_key, f.warning()) == ("detect/universal_completion",
                                            "reward-hacking detector universal_completion: one text wins 4 of 10 tasks")
