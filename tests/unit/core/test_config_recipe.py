"""A recipe's own settings (posttrain/config_recipe.py): declared by the recipe, `recipe.<name>:` in a config,
checked at load like every other key, the old places still read."""

import warnings

import pytest
import yaml

from posttrain.config import ConfigDeprecationWarning, RunConfig, load_config
from posttrain.config_recipe import recipe_settings, with_resolved_settings
from posttrain.errors import ConfigError


def test_a_recipes_settings_are_read_with_its_defaults_filled_in():
    cfg = load_config(None, ["recipe.agent.n_train=16"])
    r = recipe_settings(cfg, "agent")
    assert (r.n_train, r.n_eval) == (16, 200)  # n_eval: the section's default


def test_a_misspelt_recipe_key_is_refused_at_load_naming_the_key_and_the_right_one():
    with pytest.raises(ConfigError, match=r"unknown config key 'recipe\.agent\.n_trian' \(did you mean 'recipe\.agent\.n_train'\?\)"):
        load_config(None, ["recipe.agent.n_trian=16"])


def test_an_out_of_range_recipe_value_is_refused_at_load_naming_the_key():
    with pytest.raises(ConfigError, match=r"bad value for config key 'recipe\.rl\.stop_at_pass'"):
        load_config(None, ["recipe.rl.stop_at_pass=1.5"])


def test_settings_for_a_recipe_that_takes_none_are_refused():
    with pytest.raises(ConfigError, match=r"'recipe\.sft': the sft recipe takes no settings; recipes with settings: agent, rl"):
        load_config(None, ["recipe.sft.steps=3"])


def test_settings_for_an_unknown_recipe_are_refused_with_the_close_name():
    with pytest.raises(ConfigError, match=r"'agnet' is not a registered recipe \(did you mean 'recipe\.agent'\?\)"):
        load_config(None, ["recipe.agnet.n_train=3"])


def test_the_old_override_keys_move_to_the_recipe_with_a_deprecation_warning():
    with pytest.warns(ConfigDeprecationWarning, match=r"agent\.recipe\.n_train \(override\) is deprecated: write recipe\.agent\.n_train"):
        cfg = load_config(None, ["agent.recipe.n_train=16"])
    assert recipe_settings(cfg, "agent").n_train == 16


def test_the_old_yaml_keys_move_to_the_recipe_with_a_deprecation_warning(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"sft": {"steps": 10, "stop_at_pass": 0.4, "check_every": 5}}))
    with pytest.warns(ConfigDeprecationWarning, match=r"sft\.stop_at_pass .* write recipe\.rl\.stop_at_pass"):
        cfg = load_config(path)
    r = recipe_settings(cfg, "rl")
    assert (r.stop_at_pass, r.check_every, cfg.sft.steps) == (0.4, 5, 10)


def test_an_old_and_a_new_key_that_disagree_are_refused_naming_both(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"sft": {"stop_at_pass": 0.4}, "recipe": {"rl": {"stop_at_pass": 0.5}}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigDeprecationWarning)
        with pytest.raises(ConfigError, match=r"sft\.stop_at_pass=0\.4 and recipe\.rl\.stop_at_pass=0\.5 disagree"):
            load_config(path)


def test_the_global_schema_no_longer_holds_a_recipe_only_key():
    with pytest.raises(ConfigError, match=r"unknown config key 'recipe\.rl\.steps'"):
        load_config(None, ["recipe.rl.steps=3"])
    assert "stop_at_pass" not in RunConfig().sft.model_dump() and "recipe" not in RunConfig().agent.model_dump()


def test_the_run_config_written_for_a_recipe_holds_its_settings_in_full():
    cfg = load_config(None, ["recipe.rl.check_every=7"])
    written = with_resolved_settings(cfg, "rl").recipe["rl"]
    assert written == {"stop_at_pass": None, "check_every": 7, "val_per_domain": 100, "rl_minutes": None}
    assert cfg.recipe == {"rl": {"check_every": 7}}  # the caller's config is left as it was
