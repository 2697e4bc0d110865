"""The evaluation core (eval/core.py): one verdict rule and one pooling for the held-out eval and the suite runner."""

import asyncio
import math

import pytest
from tests.unit.agent.conftest import ScriptedEngine, tok  # noqa: F401  (tok: the fixture)

from posttrain.eval.core import Verdict, mean_pass_at_k, mean_score, tallies, verdict
from posttrain.eval.heldout import evaluate_heldout
from posttrain.eval.runner import to_record
from posttrain.eval.summary import summarize
from posttrain.tasks import generate_domain
from posttrain.types import Trajectory, TrajError, Turn, VerifyResult
from posttrain.verifiers.run import VerifierRunner


def traj(verify=None, error=None) -> Trajectory:
    turn = Turn("assistant", "5", (2,), (-0.1,))
    return Trajectory("t", "v", "arithmetic", (1,), (turn,), verify=verify, error=error)


def test_a_passing_verdict_with_a_verifier_error_is_infra_not_a_pass():
    v = verdict(traj(VerifyResult(1.0, True), TrajError("verifier", "crashed on retry")))
    assert v == Verdict(passed=False, score=0.0, infra=True)


def test_an_unscored_engine_failure_is_infra():
    assert verdict(traj(None, TrajError("engine", "oom"))).infra


def test_a_wrong_answer_is_judged_with_its_score():
    assert verdict(traj(VerifyResult(0.25, False))) == Verdict(False, 0.25, False)


def test_infra_samples_are_left_out_of_the_tallies():
    ok, infra = Verdict(True, 1.0, False), Verdict(False, 0.0, True)
    got = tallies([("a", ok), ("a", infra), ("b", infra)])
    assert got == {"a": (1, 1)}


def test_mean_score_leaves_infra_samples_out():
    assert mean_score([Verdict(False, 0.5, False), Verdict(True, 1.0, False), Verdict(False, 0.0, True)]) == 0.75
    assert math.isnan(mean_score([Verdict(False, 0.0, True)]))


def test_tasks_short_of_k_samples_are_counted_and_left_out():
    rate, short = mean_pass_at_k({"a": (2, 1), "b": (1, 1)}, 2)
    assert rate == pytest.approx(1.0) and short == 1
    assert math.isnan(mean_pass_at_k({"b": (1, 1)}, 2)[0])


def test_the_heldout_eval_and_the_suite_summary_agree_on_the_same_samples(tok):
    """Half the tasks answered right, one engine failure: both pool pass@1 through eval/core.py."""
    tasks = generate_domain("arithmetic", 6, 0)
    right = {t.prompt[0].content: str(t.oracle) for t in tasks[::2]}
    eng = ScriptedEngine(tok, lambda text: next((a for p, a in right.items() if p in text), "0"))
    res = asyncio.run(evaluate_heldout(eng, tok, tasks, VerifierRunner(None), max_new_tokens=8))
    failed = Trajectory(tasks[1].id, tasks[1].version, tasks[1].domain, (), (), error=TrajError("engine", "oom"))
    res.trajectories[1] = failed  # the summary sees the failure the held-out result never judged
    del res.passed[tasks[1].id]
    by_id = {t.id: t for t in tasks}
    records = [to_record(by_id[t.task_id], 0, 0, t, 0.0, False) for t in res.trajectories]
    summary = summarize(records, epochs=1)
    assert summary["overall"]["pass@1"] == pytest.approx(res.pass_at_1()) == pytest.approx(3 / 5)
    assert summary["overall"]["infra_errors"] == 1
