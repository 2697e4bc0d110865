"""The real-model recipe's pieces that need no model: --model resolution, the preset, the report."""

from __future__ import annotations

import json

import pytest

from posttrain.errors import ConfigError
from posttrain.recipes.quickstart import MODEL_PRESETS, model_preset_config, quickstart_model
from posttrain.eval.stats import wilson
from posttrain.recipes.report import add_intervals, write_report


def _model_dir(tmp_path, name="smollm2-135m-instruct"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "posttrain-model.json").write_text(json.dumps({"name": name}))
    return d


def test_a_converted_directory_names_its_model_through_the_manifest(tmp_path):
    d = _model_dir(tmp_path)
    assert quickstart_model(str(d)) == ("smollm2-135m-instruct", d)


def test_a_catalog_name_resolves_under_the_models_home(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    d = _model_dir(tmp_path)
    assert quickstart_model("smollm2-135m-instruct", convert=False) == ("smollm2-135m-instruct", d)


def test_an_unconverted_catalog_model_without_conversion_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_MODELS_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="posttrain models get smollm2-135m-instruct"):
        quickstart_model("smollm2-135m-instruct", convert=False)


@pytest.mark.parametrize("bad", ["no-such-model", "gemma3-270m"])
def test_a_model_without_a_preset_is_refused_naming_the_known_ones(bad):
    with pytest.raises(ConfigError) as e:
        quickstart_model(bad)
    assert bad in str(e.value) and "smollm2-135m-instruct" in str(e.value) and "\n" not in str(e.value)


def test_a_directory_of_another_model_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no recipe preset"):
        quickstart_model(str(_model_dir(tmp_path, "gemma3-270m")))


def test_the_smollm2_preset_is_grpo_with_lora_on_real_domains_and_passes_the_config_check(tmp_path):
    from posttrain.config_check import check_config

    assert MODEL_PRESETS["smollm2-135m-instruct"] == "smollm2"
    cfg = model_preset_config("smollm2-135m-instruct", _model_dir(tmp_path), ["rl.steps=3"])
    assert cfg.model.path == str((tmp_path / "smollm2-135m-instruct").resolve())
    assert cfg.trainer.lora is not None and cfg.sft.steps == 0 and cfg.rl.steps == 3
    assert set(cfg.tasks.domains) <= {"bfcl", "ifbench", "math500", "aime", "humaneval"}
    check_config(cfg, needs=("tasks", "rl"))  # names, ranges, task sources; the model dir is a stand-in


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (3, 10), (50, 100)])
def test_wilson_interval_holds_the_rate_and_stays_in_unit_range(k, n):
    lo, hi = wilson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0 and hi - lo > 0


def test_wilson_matches_the_textbook_value():
    lo, hi = wilson(8, 10)  # Wilson 95% for 8/10: [0.490, 0.943]
    assert round(lo, 3) == 0.490 and round(hi, 3) == 0.943


def test_report_lists_every_domain_with_intervals_and_the_mcnemar_p(tmp_path):
    from posttrain.eval.heldout import HeldoutResult

    dom = {"a0": "bfcl", "a1": "bfcl", "b0": "ifbench"}
    before = HeldoutResult({"a0": False, "a1": True, "b0": False}, dom)
    after = HeldoutResult({"a0": True, "a1": True, "b0": False}, dom)
    s = {"before": {"pass@1": 0.25, "domains": {"bfcl": 0.5, "ifbench": 0.0}},
         "after": {"pass@1": 0.5, "domains": {"bfcl": 1.0, "ifbench": 0.0}}, "p_value": 1.0, "n_tasks": 3,
         "domain_p_values": {"bfcl": 1.0, "ifbench": 1.0}, "flips": {"fail_to_pass": 1, "pass_to_fail": 0},
         "infra_errors": {"before": 0, "after": 0}, "wall_s": 1.0, "eval": {"temperature": 0.0}}
    add_intervals(s, before, after)
    assert s["before"]["n"] == {"bfcl": 2, "ifbench": 1} and s["after"]["ci95"]["bfcl"] == list(wilson(2, 2))
    text = write_report(tmp_path, s, "smollm2").read_text()
    assert "| bfcl | 2 | 0.500 [" in text and "| ifbench | 1 |" in text and "fail->pass 1" in text
