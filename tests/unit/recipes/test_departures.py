"""The start-of-run block: every setting that differs from a plain GRPO run, each with the key that
turns it off, and that key really removes it (the CLI test runs it end to end)."""

import pytest

from posttrain.config import load_config
from posttrain.recipes.departures import departure_lines, departures

OFF = {"sft.steps": "sft.steps=0", "tasks.sft_frac": "tasks.sft_frac=0", "rl.optim.warmup": "rl.optim.warmup=0",
       "rl.overlong.name": "rl.overlong.name=score", "rl.loss_norm": "rl.loss_norm=all_tokens", "rl.loss.name": "rl.loss.name=grpo",
       "tasks.answer_format": "tasks.answer_format=text", "eval.before": "eval.before=false",
       "eval.after": "eval.after=false"}


def keys(*overrides):
    return {k.split("=")[0] for k, _, _ in departures(load_config(None, list(overrides)), has_file_tasks=True)}


def test_the_defaults_depart_on_every_listed_setting():
    assert keys() == set(OFF)


@pytest.mark.parametrize("key", sorted(OFF))
def test_each_off_key_removes_its_line_and_only_it(key):
    also = {"sft.steps": "tasks.sft_frac",  # no SFT: its split share does not apply
            "rl.loss.name": "rl.loss_norm"}  # grpo averages per sequence: no token normaliser to speak of
    gone = {key, also.get(key, key)}
    assert keys(OFF[key]) == set(OFF) - gone


def test_every_key_off_is_a_plain_run():
    overrides = [v for k, v in OFF.items() if k != "rl.loss_norm"]  # grpo takes no token normaliser
    assert departure_lines(load_config(None, overrides), has_file_tasks=True) == [
        "settings: a plain GRPO run (no departures)"]


def test_soft_penalty_and_constant_say_what_they_do():
    text = "\n".join(departure_lines(load_config(None, ["rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 4}",
                                                        "rl.loss_norm=constant"])))
    assert "soft overlong penalty {'cache': 4}" in text and "divides by a constant" in text


def test_the_rollout_correction_is_a_departure_with_its_off_key():
    on = ["engine.args={matmul_dtype: auto}", "rl.old_logprobs=recompute", "rl.rollout_correction=true"]
    assert "rl.rollout_correction" in keys(*on)
    assert "rl.rollout_correction" not in keys(*on[:2])
    (line,) = [x for x in departure_lines(load_config(None, on)) if "rl.rollout_correction" in x]
    assert "tis correction" in line and "off: rl.rollout_correction=false" in line


@pytest.mark.parametrize("on, off", [("schedule.domain_shares=signal", "schedule.domain_shares=mixture"),
                                     ("schedule.curriculum={levels: [1, 2]}", "schedule.curriculum=null")])
def test_the_scheduler_s_domain_shares_and_curriculum_are_departures_with_their_off_keys(on, off):
    key = on.split("=")[0]
    assert key in keys(on)
    assert key not in keys(on, off)
    (line,) = [x for x in departure_lines(load_config(None, [on])) if key in x]
    assert f"off: {off}" in line


def test_an_unsteered_curriculum_is_no_departure():
    assert "schedule.curriculum" not in keys("schedule.curriculum={levels: [1, 2], steer: false}")
