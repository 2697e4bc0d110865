"""A full window of unjudged verifications stops an RL run even with rl.infra_error.action=warn."""

import pytest

from posttrain.config import InfraErrorConfig
from posttrain.train.infra_guard import InfraErrorGuard, InfraErrorRateExceeded
from posttrain.types import Trajectory, Turn, VerifyResult


def _round(n: int, infra: bool) -> list[Trajectory]:
    v = VerifyResult.infra("verifier raised ConfigError: unknown verifier 'sorted_list'") if infra else VerifyResult(1.0, True)
    return [Trajectory(f"t{i}", "v", "d", (), (Turn("assistant", "x"),), verify=v) for i in range(n)]


def test_a_full_window_of_infra_errors_stops_a_warn_run_naming_the_cause(capsys):
    guard = InfraErrorGuard(InfraErrorConfig(window=8, min_samples=4, threshold=0.2, action="warn"))
    guard.observe(_round(4, infra=True))  # half a window: a warning, the run goes on
    with pytest.raises(InfraErrorRateExceeded, match="100% of the last 8 .*unknown verifier 'sorted_list'.*not one"):
        guard.observe(_round(4, infra=True))


def test_one_judged_verification_in_the_window_keeps_a_warn_run_going(capsys):
    guard = InfraErrorGuard(InfraErrorConfig(window=8, min_samples=4, threshold=0.2, action="warn"))
    assert guard.observe(_round(1, infra=False) + _round(7, infra=True)) is not None
