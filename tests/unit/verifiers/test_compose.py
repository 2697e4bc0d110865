import asyncio

import pytest

from posttrain.registry import verifier
from posttrain.types import Limits, Spec, VerifyResult
from posttrain.verifiers.compose import step_factor, verify

from .helpers import answer, task


@verifier("test_const", answer_format="line")
class Const:
    def __init__(self, score: float, infra: bool = False) -> None:
        self.score, self.infra = score, infra

    async def __call__(self, task, trajectory, ctx):
        return VerifyResult.infra("down") if self.infra else VerifyResult(self.score, self.score == 1.0)


def part(score, weight, infra=False):
    return {"verifier": {"name": "test_const", "args": {"score": score, "infra": infra}}, "weight": weight}


def score(spec, steps=1, max_steps=10, ref=None):
    t = task(spec, limits=Limits(max_steps=max_steps), metadata={"reference_steps": ref} if ref else {})
    return asyncio.run(verify(t, answer(t, "x", steps)))


def test_weighted_sum_is_normalised():
    assert score(Spec("weighted", {"parts": [part(1.0, 3), part(0.5, 1)]})).score == pytest.approx((3 + 0.5) / 4)


def test_gate_blocks_below_threshold():
    spec = Spec("gate", {"gate": {"name": "test_const", "args": {"score": 0.9}}, "then": {"name": "test_const", "args": {"score": 1.0}}})
    r = score(spec)
    assert r.score == 0.0 and "gate failed" in r.reason
    spec = Spec("gate", {"gate": {"name": "test_const", "args": {"score": 0.9}}, "then": {"name": "test_const", "args": {"score": 0.7}}, "threshold": 0.5})
    assert score(spec).score == pytest.approx(0.7)


def test_step_factor_hand_values():
    assert step_factor(3, 3, 11, 0.5) == 1.0
    assert step_factor(7, 3, 11, 0.5) == pytest.approx(0.75)
    assert step_factor(50, 3, 11, 0.5) == pytest.approx(0.5)


def test_step_efficiency_scales_and_never_rewards_steps_alone():
    inner = {"name": "test_const", "args": {"score": 1.0}}
    assert score(Spec("step_efficiency", {"inner": inner}), steps=7, max_steps=11, ref=3).score == pytest.approx(0.75)
    zero = {"name": "test_const", "args": {"score": 0.0}}
    assert score(Spec("step_efficiency", {"inner": zero}), steps=1, ref=3).score == 0.0


def test_infra_errors_propagate_and_are_not_zero_scores():
    r = score(Spec("weighted", {"parts": [part(1.0, 1), part(1.0, 1, infra=True)]}))
    assert r.status == "infra_error"
    r = score(Spec("step_efficiency", {"inner": {"name": "test_const", "args": {"score": 1.0, "infra": True}}}))
    assert r.status == "infra_error"
