"""Reward-hacking detectors: each finds its planted pattern; none alarms on an honest run."""

from __future__ import annotations

import random

import pytest

from posttrain.eval.detectors import run_detectors
from posttrain.eval.detectors.signatures import signature_hits
from posttrain.registry import registry
from posttrain.view.runs import RunView
from posttrain.testing.synthetic_runs import write_run

PLANTED = {"heldout_flat": "reward_vs_heldout", "exploit": "exploit_signatures", "universal": "universal_completion",
           "status_shift": "status_shift", "length": "length_or_format"}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    root = tmp_path_factory.mktemp("det")
    out = {}
    for pattern in (None, *PLANTED):
        run = RunView(write_run(root / str(pattern), steps=20, groups=6, group_size=6, pattern=pattern, seed=11))
        with run.db() as db:
            out[pattern] = {f.detector: f for f in run_detectors(run.metrics(), db)}
    return out


def test_every_detector_is_registered_by_name():
    assert set(PLANTED.values()) <= set(registry("detector").names())


@pytest.mark.parametrize("pattern", sorted(PLANTED))
def test_detector_alarms_on_its_planted_pattern(findings, pattern):
    f = findings[pattern][PLANTED[pattern]]
    assert f.alarm, f.message


@pytest.mark.parametrize("name", sorted(PLANTED.values()))
def test_detector_is_quiet_on_an_honest_run(findings, name):
    f = findings[None][name]
    assert not f.alarm, f.message


def test_findings_become_metrics(findings):
    m = findings["universal"]["universal_completion"].metrics()
    assert m["detect/universal_completion"] == 1.0 and 0 < m["detect/universal_completion/score"] <= 1


def test_thin_data_says_so_instead_of_alarming(tmp_path):
    run = RunView(write_run(tmp_path / "r", steps=2, groups=1, group_size=2, seed=0))
    with run.db() as db:
        fs = run_detectors(run.metrics(), db)
    assert not any(f.alarm for f in fs)
    assert not next(f for f in fs if f.detector == "reward_vs_heldout").enough_data


def test_no_store_yet_means_no_alarm():
    assert not any(f.alarm for f in run_detectors([], None))


def _probe_answers():
    from posttrain.tasks import generate_domain
    from posttrain.verifiers.soundness import hack_probes_exec  # noqa: F401 - registers the code and shell probes
    from posttrain.verifiers.soundness.hack_probes import ProbeView
    from posttrain.verifiers.soundness.probe_check import probes_for

    for domain in ("arithmetic", "code", "humaneval", "terminal", "tools", "extraction", "needle", "math"):
        for task in generate_domain(domain, 2, 0):
            view = ProbeView.of(task)
            for p in probes_for(task):
                text = p.make(view, random.Random(0))
                if text is not None:
                    yield p.name, domain, text


def test_every_hack_probe_answer_matches_a_signature():
    missed = [(name, domain) for name, domain, text in _probe_answers() if not signature_hits(text)]
    assert missed == []


@pytest.mark.parametrize("honest", ["74", "x*5+6", "def f(x):\n    return x * 2 + 1\n", "The answer is \\boxed{12}",
                                    '{"name": "Ada", "age": 36}',
                                    # SmolLM2's prose on BFCL irrelevance tasks, once flagged fake_markers / marker_only
                                    "The quickest way to get to Tokyo from London by flight is to take the train from Tokyo.",
                                    "multiply the number of successful outcomes by the probability of success (0.1)",
                                    "To determine this answer,  on one line we will answer:"])
def test_honest_answers_match_no_signature(honest):
    assert signature_hits(honest) == []


def test_min_step_limits_the_trajectories_read(tmp_path):
    run = RunView(write_run(tmp_path / "r", steps=30, groups=6, group_size=6, pattern="status_shift", seed=11))
    with run.db() as db:
        late = run_detectors(run.metrics(), db, names=["status_shift"], min_step=15)[0]
    assert late.enough_data and not late.alarm  # the shift at step 15 is the window's start: no change inside it
