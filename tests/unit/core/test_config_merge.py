"""Config layering: preset <- YAML <- dotted overrides, merged deeply; ranges checked at load."""

import pytest

from posttrain.config import deep_merge, load_config
from posttrain.errors import ConfigError

PRESET = {"rl": {"steps": 1500, "lr": 1e-4}, "tasks": {"domains": {"chart": {"n_train": 9}, "ui": {"n_train": 9}}}}


def test_yaml_section_over_a_preset_keeps_the_presets_other_keys(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl: {steps: 10}\n")
    cfg = load_config(p, base=PRESET)
    assert cfg.rl.steps == 10 and cfg.rl.optim.lr == 1e-4


def test_dotted_override_and_yaml_agree_on_what_they_keep(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl: {steps: 10}\n")
    assert load_config(p, base=PRESET).rl.optim.lr == load_config(None, ["rl.steps=10"], base=PRESET).rl.optim.lr


def test_yaml_null_drops_a_presets_domain(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("tasks: {domains: {ui: null}}\n")
    assert set(load_config(p, base=PRESET).tasks.domains) == {"chart"}


def test_deep_merge_does_not_mutate_its_inputs():
    base = {"a": {"b": 1}}
    out = deep_merge(base, {"a": {"c": 2}})
    assert out == {"a": {"b": 1, "c": 2}} and base == {"a": {"b": 1}}


@pytest.mark.parametrize("override, key", [("rl.steps=-3", "rl.steps"), ("rl.lr=0", "rl.optim.lr"),
                                           ("rl.group_size=0", "rl.group_size"), ("sft.batch_size=0", "sft.batch_size"),
                                           ("rl.top_p=1.5", "rl.top_p"), ("tasks.domains.code.n_eval=-1",
                                                                          "tasks.domains.code.n_eval")])
def test_out_of_range_numbers_fail_at_load_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=f"bad value for config key '{key}'"):
        load_config(None, [override])


@pytest.mark.parametrize("key", ["sandbox.wall_s", "sandbox.memory_mb", "engine.max_batch", "eval.epochs"])
def test_keys_nothing_reads_are_gone(key):
    with pytest.raises(ConfigError, match="unknown config key"):
        load_config(None, [f"{key}=1"])


def test_loss_gets_its_own_clip_defaults_unless_set():
    assert "clip_eps" not in load_config(None, ["rl.loss=gspo"]).rl.loss_kwargs()
    kw = load_config(None, ["rl.clip_eps=0.1", "rl.loss.args={clip_eps_high: 0.3}"]).rl.loss_kwargs()
    assert kw["clip_eps"] == 0.1 and kw["clip_eps_high"] == 0.3


def test_loss_args_reach_the_loss():
    import torch

    from posttrain.registry import registry

    kw = load_config(None, ["rl.loss={name: gspo, args: {clip_eps: 0.5, clip_eps_high: 0.5}}"]).rl.loss_kwargs()
    logp = torch.full((1, 3), -1.0)
    old = torch.full((1, 3), -1.5)  # ratio e^0.5 = 1.65: clipped at 1.5 with these args, at 1.0004 by default
    adv, mask = torch.ones(1), torch.ones(1, 3)
    wide, _ = registry("loss").get("gspo")(logp, old, adv, mask, **kw)
    narrow, _ = registry("loss").get("gspo")(logp, old, adv, mask)
    assert float(wide) == pytest.approx(-1.5, abs=1e-6) and float(narrow) == pytest.approx(-(1 + 4e-4), abs=1e-6)


def test_relative_plugin_paths_resolve_against_the_yaml_file(tmp_path, monkeypatch):
    (tmp_path / "conf" / "plugins").mkdir(parents=True)
    (tmp_path / "conf" / "plugins" / "mine.py").write_text("")  # load_config imports it, before the names are checked
    p = tmp_path / "conf" / "c.yaml"
    p.write_text("plugins: [plugins/mine.py]\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(p).plugins == [str(tmp_path / "conf" / "plugins" / "mine.py")]
