"""Trained vs held-out domains in a run's summary (eval/transfer.py, recipes/quickstart.summarize)."""

from __future__ import annotations

from posttrain.eval.heldout import HeldoutResult
from posttrain.eval.transfer import generalisation


def _res(passed: dict[str, bool]) -> HeldoutResult:
    return HeldoutResult(passed, {t: t.split("-")[0] for t in passed})


BEFORE = _res({**{f"a-{i}": i < 2 for i in range(10)}, **{f"b-{i}": False for i in range(10)},
               **{f"h-{i}": i < 3 for i in range(10)}})
AFTER = _res({**{f"a-{i}": i < 8 for i in range(10)}, **{f"b-{i}": i < 4 for i in range(10)},
              **{f"h-{i}": i < 5 for i in range(10)}})


def test_held_out_domains_are_reported_apart_from_the_trained_ones():
    g = generalisation(BEFORE, AFTER, held_out=["h"])
    assert g["trained_domains"]["domains"] == ["a", "b"] and g["held_out_domains"]["domains"] == ["h"]
    assert g["trained_domains"]["n_tasks"] == 20 and g["held_out_domains"]["n_tasks"] == 10


def test_each_group_has_its_mean_its_paired_delta_and_an_interval_around_it():
    g = generalisation(BEFORE, AFTER, held_out=["h"])
    t, h = g["trained_domains"], g["held_out_domains"]
    assert abs(t["before"] - 0.1) < 1e-9 and abs(t["after"] - 0.6) < 1e-9 and abs(t["delta"] - 0.5) < 1e-9
    assert abs(h["delta"] - 0.2) < 1e-9 and h["ci95"][0] <= 0.2 <= h["ci95"][1]
    assert t["p_value"] < 0.01 and h["p_value"] > 0.05  # 10 fail->pass flips vs 2


def test_the_summary_and_report_carry_it_only_when_domains_are_held_out(tmp_path):
    from posttrain.config import load_config
    from posttrain.recipes.quickstart import summarize
    from posttrain.recipes.report import add_intervals, write_report

    plain = load_config(None, ['tasks.domains={"a": {}, "b": {}, "h": {}}'])
    assert "generalisation" not in summarize(BEFORE, AFTER, plain, tmp_path)
    held = load_config(None, ['tasks.domains={"a": {}, "b": {}, "h": {"held_out": true}}'])
    s = add_intervals(summarize(BEFORE, AFTER, held, tmp_path), BEFORE, AFTER)
    assert s["generalisation"]["held_out_domains"]["domains"] == ["h"]
    text = write_report(tmp_path, {**s, "wall_s": 1.0}).read_text()
    assert "| **held-out domains (never trained on)** (1) | 10 | 0.300 | 0.500 | +0.200 [" in text
