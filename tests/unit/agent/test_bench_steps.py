"""posttrain.eval.agent_eval.steps_change: the steps-on-solved statistic the agent headline reports."""

from __future__ import annotations

import pytest

from posttrain.eval import agent_eval as bench


def test_steps_pair_by_task_and_count_tasks_whose_mean_fell():
    before = {f"t{i}": [3, 2] if i < 20 else [2] for i in range(40)}  # 20 tasks re-read on half their samples
    after = {f"t{i}": [2, 2] for i in range(40)}
    after["t39"] = []  # unsolved after RL: not paired
    s = bench.steps_change(before, after)
    assert s["tasks"] == 39 and (s["fell"], s["rose"]) == (20, 0)
    assert s["delta"] == pytest.approx(-0.5 * 20 / 39) and s["high"] < 0
    assert s["sign_p"] == pytest.approx(2 * 0.5 ** 20) and s["p"] < 1e-3
    assert s["over_min"] == [pytest.approx(20 / 60), 0.0]


def test_no_change_in_steps_is_not_significant():
    same = {f"t{i}": [2, 3] if i % 2 else [2] for i in range(30)}
    s = bench.steps_change(same, same)
    assert s["delta"] == 0 and (s["fell"], s["rose"]) == (0, 0) and s["sign_p"] == 1.0 and s["p"] == 1.0
