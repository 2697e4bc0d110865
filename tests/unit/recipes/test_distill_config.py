"""`posttrain distill`'s config: where the teacher may be named, and the checks that read no weights."""

import pytest

from posttrain.errors import ConfigError
from posttrain.recipes.distill import distill_config


def test_a_teacher_under_models_is_the_distill_teacher(tmp_path):
    cfg_file = tmp_path / "d.yaml"
    cfg_file.write_text("models: {teacher: {path: tiny}}\n")
    cfg = distill_config(cfg_file, [])
    assert cfg.distill.teacher is not None and cfg.distill.teacher.path == "tiny"
    assert cfg.rl.loss.name == "distill" and cfg.sft.steps == 0  # the command's defaults under the file


def test_two_different_teachers_are_refused_naming_both_keys(tmp_path):
    cfg_file = tmp_path / "d.yaml"
    cfg_file.write_text("models: {teacher: {path: tiny}}\ndistill: {teacher: {path: other/model}}\n")
    with pytest.raises(ConfigError, match="distill.teacher and models.teacher name different teachers"):
        distill_config(cfg_file, [])


def test_a_directory_without_config_json_is_not_a_teacher(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"distill.teacher.path=.*empty: not a model directory \(no config.json\)"):
        distill_config(None, [f"distill.teacher.path={tmp_path / 'empty'}"])


def test_one_override_names_the_teacher_when_the_config_has_none():
    cfg = distill_config(None, ["distill.teacher.path=tiny"])
    assert cfg.models["teacher"].path == "tiny"
