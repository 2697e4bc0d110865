"""Config loading: defaults, dotted overrides, and one-line errors naming key and file."""

import pytest

from posttrain.config import load_config
from posttrain.errors import ConfigError, ModelError


def test_overrides_apply_with_yaml_types():
    cfg = load_config(None, ["rl.lr=3e-4", "rl.steps=7", "tasks.domains.code.n_eval=5"])
    assert cfg.rl.optim.lr == 3e-4 and cfg.rl.steps == 7 and cfg.tasks.domains["code"].n_eval == 5


def test_unknown_key_names_key_and_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl:\n  stpes: 3\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'rl.stpes' \(did you mean 'rl.steps'\?\) in .*c.yaml"):
        load_config(p)


def test_wrong_type_names_key(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl:\n  steps: many\n")
    with pytest.raises(ConfigError, match=r"bad value for config key 'rl.steps' in .*c.yaml"):
        load_config(p)


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="config file not found: .*nope.yaml"):
        load_config(tmp_path / "nope.yaml")


def test_missing_model_directory_is_named(tmp_path):
    from posttrain.models import load_policy

    with pytest.raises(ModelError, match="model directory not found: .*absent"):
        load_policy(tmp_path / "absent")


def test_override_inside_a_default_mapping_keeps_its_other_entries():
    cfg = load_config(None, ["tasks.domains.code.args.form=shift"])
    assert set(cfg.tasks.domains) == {"arithmetic", "code"}
    assert cfg.tasks.domains["code"].args == {"form": "shift"}
    assert cfg.tasks.domains["code"].difficulty == load_config().tasks.domains["code"].difficulty


def test_yaml_mapping_replaces_the_default_mapping(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("tasks:\n  domains:\n    code: {n_train: 5}\n")
    assert set(load_config(p, ["tasks.domains.code.n_eval=3"]).tasks.domains) == {"code"}
