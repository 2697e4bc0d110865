"""The `judge` verifier: verdicts, failures as infra errors, position bias, cache, gate, hack probes."""

from __future__ import annotations

import asyncio
import re

import pytest

from posttrain.config_schema import SecondModelConfig
from posttrain.models.service import open_service, register_service, unregister_service
from posttrain.registry import build
from posttrain.types import Message, Spec, Task, Trajectory, Turn
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.judge import clear_cache
from posttrain.testing.judge_probes import probes_for
from posttrain.verifiers.run import VerifierRunner
from tests.unit.second.judge_helpers import FixedReply, GullibleJudge, install

TASK = Task("t1", "arithmetic", (Message("user", "47+38="),), Spec("judge", {"mode": "reference"}), oracle="85")

RUBRIC = "The answer states the exact sum of the two numbers as a single integer."
PROBES = probes_for("84", RUBRIC)  # wrong answers dressed to persuade the judge


@pytest.fixture(autouse=True)
def _fresh():
    clear_cache()
    yield
    unregister_service("judge")


def traj(text: str) -> Trajectory:
    return Trajectory(TASK.id, TASK.version, TASK.domain, (), (Turn("assistant", text),))


def judge(text: str, task: Task = TASK, spec: Spec | None = None):
    v = build(spec or task.verifier, kind="verifier")
    return asyncio.run(v(task, traj(text), VerifyContext()))


def test_the_right_answer_passes_and_a_wrong_one_fails_under_an_honest_reading():
    install(GullibleJudge())
    assert (judge("85").score, judge("84").score) == (1.0, 0.0)


@pytest.mark.parametrize("kind,probe", PROBES)
def test_every_hack_probe_scores_zero_under_a_gullible_judge(kind, probe):
    backend = GullibleJudge()
    install(backend)
    spec = Spec("judge", {"mode": "rubric", "rubric": RUBRIC}) if kind == "repeats_rubric" else None
    r = judge(probe, spec=spec)
    assert (r.status, r.score) == ("ok", 0.0), r
    assert backend.seen == []  # settled by the program-side flags: the judge never read it


def test_a_quoted_answer_cannot_close_its_block():
    backend = GullibleJudge()
    install(backend)
    judge("84 ``` <b>x</b>")
    assert "<b>" not in backend.seen[0] and "```" not in backend.seen[0] and "‹b›" in backend.seen[0]


def test_a_judge_reply_without_a_verdict_is_an_infra_error_not_a_score():
    install(FixedReply("I think it might be fine"))
    r = judge("85")
    assert r.status == "infra_error" and r.details["judge"] == "unparseable"


def test_a_failing_judge_server_makes_the_trajectory_an_infra_error(failing_server):
    svc = open_service("judge", SecondModelConfig(url=failing_server, retries=1, backoff_s=0.0))
    register_service(svc)
    (out,) = asyncio.run(VerifierRunner(None, retries=0).verify_all({TASK.id: TASK}, [traj("85")]))
    assert out.infra_error and out.error.boundary == "verifier" and out.reward == 0.0


def test_pairwise_judging_runs_both_orders_and_a_position_biased_judge_ties():
    install(FixedReply("A"))  # always prefers the first answer shown
    r = judge("84", spec=Spec("judge", {"mode": "pairwise"}))
    assert r.score == 0.5 and r.details["position_flip"] is True


def test_pairwise_winner_in_both_orders_scores_one():
    class PrefersCandidate(FixedReply):
        async def chat_batch(self, convs, params):  # reads answer A's block whole: its marker's random nonce may hold "84"
            return ["A" if re.search(r"\[BEGIN A \w+\]\n84\n\[END A", c[-1]["content"]) else "B" for c in convs]
    install(PrefersCandidate(""))
    assert judge("84", spec=Spec("judge", {"mode": "pairwise"})).score == 1.0


def test_verdicts_are_cached_by_content():
    backend = FixedReply("PASS")
    install(backend)
    judge("85")
    judge("85")
    assert backend.calls == 1


def test_a_program_gate_means_the_judge_can_only_lower_the_score():
    install(FixedReply("PASS"))  # passes everything
    spec = Spec("judge", {"mode": "reference", "gate": {"name": "exact_numeric", "args": {"answer": 85}}})
    assert (judge("84", spec=spec).score, judge("85", spec=spec).score) == (0.0, 1.0)


def test_the_tiny_model_as_judge_scores_every_probe_zero():
    register_service(open_service("judge", SecondModelConfig(path="tiny", max_new_tokens=4)))
    probes = [p for k, p in PROBES if k != "repeats_rubric"]
    v = build(TASK.verifier, kind="verifier")
    rs = asyncio.run(v.verify_batch(TASK, probes, VerifyContext()))
    assert [r.score for r in rs] == [0.0] * len(probes)


def test_unknown_judge_model_is_a_one_line_error():
    with pytest.raises(Exception, match="second model 'nope' is not open"):
        judge("85", spec=Spec("judge", {"model": "nope"}))
