"""The outage scenario on the real verification loop: code answers verified through a real
pool whose zygotes are killed mid-run. Recovery leaves no infra errors behind; an outage
that persists trips rl.infra_error (warn or stop), naming the cause."""

from __future__ import annotations

import os
import signal

import pytest

from posttrain.config import InfraErrorConfig
from posttrain.sandbox import SandboxPool
from posttrain.sandbox.zygote import Zygote
from posttrain.tasks import generate_domain
from posttrain.train.infra_guard import InfraErrorGuard, InfraErrorRateExceeded
from posttrain.types import Trajectory, Turn
from posttrain.verifiers.run import VerifierRunner

from .test_faults_dead_slot import idle_slots, zygote_interpreter_pid

TASKS = generate_domain("code", 4, 0)
BY_ID = {t.id: t for t in TASKS}


def round_of_answers(k: int) -> list[Trajectory]:
    """8 distinct correct answers (distinct texts: the verifier's cache must not hide the sandbox)."""
    return [Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", f"{t.oracle}+0*{100 + 10 * k + j}"),))
            for t in TASKS for j in range(2)]


@pytest.fixture()
def pool(runner):
    p = SandboxPool(concurrency=2, mode="pooled")
    runner.run(p.warm(n=2))
    if any(z.cg is None for z in idle_slots(p)):
        runner.run(p.close())
        pytest.skip("no writable cgroup: cannot find the zygote to kill")
    yield p
    runner.run(p.close())


def verify_round(run, runner_, k):
    return run(runner_.verify_all, BY_ID, round_of_answers(k))


def test_zygotes_killed_mid_run_leave_no_infra_errors_after_recovery(pool, run):
    vr = VerifierRunner(pool, concurrency=2, retries=0)  # no verifier retries: only the pool's recovery counts
    guard = InfraErrorGuard(InfraErrorConfig(window=32, min_samples=8, threshold=0.1, action="stop"), pool)
    before = verify_round(run, vr, 0)
    guard.observe(before)
    for z in idle_slots(pool):  # the outage: every warm zygote dies
        os.kill(zygote_interpreter_pid(z), signal.SIGKILL)
        z.launched.proc.wait(timeout=30)
    after = [t for k in (1, 2, 3) for t in verify_round(run, vr, k)]
    guard.observe(after)  # would raise at >= 10% infra errors
    assert [t.reward for t in before + after] == [1.0] * 32
    assert sum(t.infra_error for t in after) == 0
    assert pool.stats()["slot_deaths"] == 2


def _always_dying_zygotes(monkeypatch):
    real_exec = Zygote.exec

    async def die_then_exec(self, *a, **kw):  # the whole slot dies: zygote and its prepared execution
        self.cg.kill_all()
        return await real_exec(self, *a, **kw)

    monkeypatch.setattr(Zygote, "exec", die_then_exec)


def test_a_persistent_outage_warns_loudly_naming_the_cause(pool, run, monkeypatch, capsys):
    _always_dying_zygotes(monkeypatch)
    vr = VerifierRunner(pool, concurrency=2, retries=0)
    guard = InfraErrorGuard(InfraErrorConfig(window=16, min_samples=8, threshold=0.2, action="warn"), pool)
    trajs = verify_round(run, vr, 0)
    warning = guard.observe(trajs)
    assert all(t.infra_error for t in trajs)  # never a score of 0 for the model
    assert warning is not None and warning in capsys.readouterr().err
    assert "sandbox: 100% of the last 8 verifications were infra errors" in warning
    assert f"warm slot died {pool.stats()['slot_deaths']} times" in warning and "last error: warm slot failed" in warning
    assert "rl.infra_error.action=stop" in warning


def test_a_persistent_outage_stops_the_run_when_configured(pool, run, monkeypatch):
    _always_dying_zygotes(monkeypatch)
    vr = VerifierRunner(pool, concurrency=2, retries=0)
    guard = InfraErrorGuard(InfraErrorConfig(window=16, min_samples=8, threshold=0.2, action="stop"), pool)
    with pytest.raises(InfraErrorRateExceeded, match=r"sandbox: 100% of the last 8 verifications.*warm slot died"):
        guard.observe(verify_round(run, vr, 0))


def test_below_min_samples_or_threshold_the_guard_says_nothing(pool, run, capsys):
    vr = VerifierRunner(pool, concurrency=2, retries=0)
    guard = InfraErrorGuard(InfraErrorConfig(window=16, min_samples=4, threshold=0.2, action="stop"), pool)
    assert guard.observe(verify_round(run, vr, 0)) is None
    assert capsys.readouterr().err == ""
