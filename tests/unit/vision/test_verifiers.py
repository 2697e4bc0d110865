"""visual_choice / visual_number / point_in_box judge the answer text against recorded truth."""

from __future__ import annotations

import asyncio

import pytest

from posttrain.types import Spec, Task, Trajectory, Turn
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.compose import build_verifier


def score(spec: Spec, text: str):
    task = Task("t", "x", (), spec)
    traj = Trajectory("t", task.version, "x", (), (Turn("assistant", text),))
    return asyncio.run(build_verifier(spec)(task, traj, VerifyContext()))


def test_choice_accepts_answer_case_insensitively():
    assert score(Spec("visual_choice", {"answer": "B", "options": ["A", "B"]}), " b ").passed


def test_choice_outside_options_fails_with_reason():
    r = score(Spec("visual_choice", {"answer": "B", "options": ["A", "B"]}), "Z")
    assert not r.passed and r.reason == "not an option"


def test_number_within_tolerance():
    spec = Spec("visual_number", {"answer": 7, "tol": 1})
    assert score(spec, "8").passed and not score(spec, "9").passed


@pytest.mark.parametrize("text,ok", [("12,30", True), ("(10, 25)", True), ("9,30", False), ("near", False)])
def test_point_in_box(text, ok):
    assert score(Spec("point_in_box", {"box": [10, 25, 20, 35]}), text).passed is ok
