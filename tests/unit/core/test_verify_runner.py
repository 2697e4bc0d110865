"""Bad model output scores 0 with a reason; sandbox failures are infra errors, retried, never 0."""

import asyncio

import pytest

from posttrain.sandbox import default_sandbox
from posttrain.tasks import generate_domain
from posttrain.train.rl import estimate_advantages
from posttrain.types import ExecResult, Trajectory, Turn
from posttrain.verifiers.run import VerifierRunner


def traj(task, text, finish="stop", sample=0):
    return Trajectory(task.id, task.version, task.domain, (1, 2), (Turn("assistant", text, (5,), (-0.1,)),),
                      finish_reason=finish, sample=sample)


@pytest.fixture(scope="module")
def code_task():
    return generate_domain("code", 1, seed=0)[0]


@pytest.fixture(scope="module")
def arith_task():
    return generate_domain("arithmetic", 1, seed=0)[0]


def judge(task, t, sandbox=None):
    return asyncio.run(VerifierRunner(sandbox).verify_one(task, t))


@pytest.mark.parametrize("text,finish,reason", [
    ("", "stop", "empty completion"),
    ("4\ufffd2", "stop", "not valid UTF-8"),
    ("1" * 50, "length", "unterminated"),
    ("12\n13", "stop", "more than one line"),
])
def test_malformed_completions_score_zero_with_reason(arith_task, text, finish, reason):
    out = judge(arith_task, traj(arith_task, text, finish))
    assert out.verify.status == "ok" and out.verify.score == 0.0 and out.reward == 0.0
    assert reason in out.verify.reason


def test_malformed_code_scores_zero_without_a_sandbox_run(code_task):
    out = judge(code_task, traj(code_task, "x*(3+"))  # no sandbox given: must not need one
    assert out.verify.status == "ok" and out.verify.score == 0.0
    assert out.verify.reason == "syntax error"


def test_oracle_code_passes_all_tests_in_the_sandbox(code_task):
    out = judge(code_task, traj(code_task, code_task.oracle), default_sandbox())
    assert out.verify.status == "ok" and out.verify.score == 1.0 and out.verify.passed


def test_partially_right_code_gets_partial_credit(code_task):
    c = code_task.metadata["c"]
    out = judge(code_task, traj(code_task, f"x*0+{c}"), default_sandbox())  # right only at x = 0
    assert out.verify.score == pytest.approx(1 / 6)


def test_code_that_prints_a_fake_result_does_not_pass(code_task):
    fake = "print('@@RESULT@@[' + ','.join(['{\"value\": 1}'] * 6) + ']') or __import__('os')._exit(0)"
    out = judge(code_task, traj(code_task, fake), default_sandbox())
    assert out.verify.score < 1.0


class BrokenSandbox:
    """A sandbox whose machinery fails: every exec reports sandbox_error."""

    def __init__(self):
        self.calls = 0

    async def exec(self, cmd, files=None, stdin=b"", limits=None, image="host", read_files=()):
        self.calls += 1
        return ExecResult(status="sandbox_error", error="bwrap: setting up uid map: Permission denied")


def test_sandbox_failure_is_infra_error_retried_not_zero(code_task):
    sb = BrokenSandbox()
    out = asyncio.run(VerifierRunner(sb, retries=2).verify_one(code_task, traj(code_task, code_task.oracle)))
    assert out.verify.status == "infra_error"
    assert sb.calls == 3  # first try + 2 retries
    assert out.error is not None and out.error.boundary == "verifier"


def test_infra_errors_get_zero_advantage_and_do_not_shift_the_baseline(code_task):
    import dataclasses

    from posttrain.types import VerifyResult

    ok = [dataclasses.replace(traj(code_task, "x", sample=i), reward=r, verify=VerifyResult(r, r == 1.0))
          for i, r in enumerate([1.0, 0.0])]
    bad = dataclasses.replace(traj(code_task, "x", sample=2), verify=VerifyResult.infra("down"))
    adv = estimate_advantages([ok + [bad]], "group_mean")
    assert adv.tolist() == pytest.approx([0.5, -0.5, 0.0])


def test_batched_group_scores_equal_one_by_one_scores(code_task):
    m, c = code_task.metadata["m"], code_task.metadata["c"]
    answers = [code_task.oracle, f"x*0+{c}", "1/0", "x*(3+", "[0]*10**10", f"x*{m}+{c}+0*len(open('/etc/passwd').read())"]
    group = [traj(code_task, a, sample=i) for i, a in enumerate(answers)]
    batched = asyncio.run(VerifierRunner(default_sandbox()).verify_all({code_task.id: code_task}, group))
    single = [judge(code_task, t, default_sandbox()) for t in group]
    assert [b.verify.score for b in batched] == [s.verify.score for s in single]
    assert batched[0].verify.score == 1.0 and batched[1].verify.score == pytest.approx(1 / 6)


def test_a_hanging_answer_in_a_batch_does_not_sink_its_siblings(code_task):
    group = [traj(code_task, a, sample=i) for i, a in enumerate([code_task.oracle, "[x for _ in iter(int, 1)]"])]
    out = asyncio.run(VerifierRunner(default_sandbox()).verify_all({code_task.id: code_task}, group))
    assert out[0].verify.score == 1.0
    assert out[1].verify.score == 0.0 and out[1].verify.status == "ok"
