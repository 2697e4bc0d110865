"""Named components have one shape, `{name, args}` (a bare name is shorthand), and every registry
name a config uses is checked by load_config itself: a one-line error naming the key and listing the
registered names. Older shapes (`rl.loss_args`, `schedule.policy`) still load, with a FutureWarning."""

import typing
import warnings

import pytest
import yaml
from pydantic import BaseModel

from posttrain.config import load_config
from posttrain.config_schema import Component, Registered, RunConfig
from posttrain.errors import ConfigError


def _load_quiet(*overrides, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return load_config(kw.pop("path", None), list(overrides), **kw)


def test_a_bare_name_is_shorthand_for_name_and_empty_args():
    cfg = load_config(None, ["rl.loss=gspo", "rl.advantage=rloo", "schedule=learning_signal", "engine=hf"])
    assert (cfg.rl.loss, cfg.rl.advantage) == (Component(name="gspo"), Component(name="rloo"))
    assert (cfg.schedule.name, cfg.schedule.args, cfg.engine.name) == ("learning_signal", {}, "hf")


def test_the_full_shape_loads_and_args_reach_the_consumers():
    cfg = load_config(None, ["rl.loss={name: gspo, args: {clip_eps: 0.001}}", "rl.offpolicy={name: icepop, args: {low: 0.5}}"])
    assert cfg.rl.loss_kwargs()["clip_eps"] == 0.001 and cfg.rl.offpolicy.args == {"low": 0.5}


def test_args_without_a_name_keep_the_default_name(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl: {loss: {args: {clip_eps_high: 0.3}}}\n")
    assert load_config(p).rl.loss == Component(name="dapo", args={"clip_eps_high": 0.3})


def test_a_layer_naming_another_component_does_not_inherit_its_args(tmp_path):
    base = {"rl": {"loss": {"name": "gspo", "args": {"clip_eps": 3e-4}}}, "engine": {"name": "fast", "args": {"max_batch": 8}}}
    p = tmp_path / "c.yaml"
    p.write_text("rl: {loss: dapo}\nengine: {args: {kv_mb: 64}}\n")
    cfg = load_config(p, base=base)
    assert cfg.rl.loss == Component(name="dapo")  # gspo's clip range is not dapo's
    assert cfg.engine.args == {"max_batch": 8, "kv_mb": 64}  # the same engine: its args merge


def test_a_name_then_its_args_as_overrides():
    assert load_config(None, ["rl.loss=gspo", "rl.loss.args.clip_eps=0.002"]).rl.loss.args == {"clip_eps": 0.002}


@pytest.mark.parametrize("old, new, read", [
    ("rl.loss_args={clip_eps: 0.1}", "rl.loss.args", lambda c: c.rl.loss.args == {"clip_eps": 0.1}),
    ("rl.loss_args.clip_eps=0.1", "rl.loss.args.clip_eps", lambda c: c.rl.loss.args == {"clip_eps": 0.1}),
    ("schedule.policy=learning_signal", "schedule.name", lambda c: c.schedule.name == "learning_signal"),
])
def test_an_old_override_is_migrated_with_a_one_line_deprecation_note(old, new, read):
    with pytest.warns(FutureWarning, match=rf"config key {old.split('=')[0]} \(override\) is deprecated: write {new}$"):
        cfg = load_config(None, [old])
    assert read(cfg)


def test_an_old_yaml_is_migrated_per_layer(tmp_path):
    p = tmp_path / "old.yaml"
    p.write_text(yaml.safe_dump({"rl": {"loss": "gspo", "loss_args": {"clip_eps": 1e-3}, "lr": 1e-4},
                                 "schedule": {"policy": "learning_signal", "args": {"floor": 0.1}}}))
    with pytest.warns(FutureWarning, match=rf"config key rl.loss_args \({p}\) is deprecated: write rl.loss.args"):
        cfg = load_config(p, ["rl.loss.args.clip_eps_high=0.002"])
    assert cfg.rl.loss == Component(name="gspo", args={"clip_eps": 1e-3, "clip_eps_high": 2e-3})
    assert (cfg.schedule.name, cfg.schedule.args, cfg.rl.optim.lr) == ("learning_signal", {"floor": 0.1}, 1e-4)


def test_an_old_and_a_new_key_that_disagree_are_both_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("schedule: {policy: uniform, name: learning_signal}\n")
    with pytest.raises(ConfigError, match="schedule.policy='uniform' and schedule.name='learning_signal' disagree"):
        _load_quiet(path=p)


def test_a_saved_config_loads_back_unchanged(tmp_path):
    from posttrain.config import dump_config

    cfg = load_config(None, ["rl.loss={name: gspo, args: {clip_eps: 0.001}}", "schedule=learning_signal"])
    dump_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg


@pytest.mark.parametrize("override, line", [
    ("rl.loss=dapx", "rl.loss.name='dapx' is not a registered loss (did you mean 'dapo'?); known: cispo, dapo,"),
    ("rl.advantage={name: rlo}", "rl.advantage.name='rlo' is not a registered advantage (did you mean 'rloo'?); known:"),
    ("rl.offpolicy=tiss", "rl.offpolicy.name='tiss' is not a registered offpolicy (did you mean 'tis'?); known:"),
    ("rl.overlong=cut", "rl.overlong.name='cut' is not a registered overlong"),
    ("schedule=greedy", "schedule.name='greedy' is not a registered sched_policy; known:"),
    ("engine=vlm", "engine.name='vlm' is not a registered engine (did you mean 'vllm'?); known: fast, hf, vllm"),
    ("rl.kl_estimator=k9", "rl.kl_estimator.name='k9' is not a registered kl; known: k1, k2, k3"),
    ("dpo.loss=hinge", "dpo.loss.name='hinge' is not a registered dpo_loss; known:"),
    ("log.trackers=[tensorbord]", "log.trackers='tensorbord' is not a registered tracker (did you mean 'tensorboard'?)"),
    ("models.judge={path: tiny, engine: fst}", "models.judge.engine='fst' is not a registered engine"),
])
def test_an_unknown_name_is_refused_at_load_naming_the_key_and_the_registered_names(override, line):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


@pytest.mark.parametrize("override, line", [
    ("rl.advantage.args.eps=1", "rl.advantage.args.eps: advantage 'group_norm' takes no argument 'eps'"),
    ("rl.advantage.args.rewards=1", "rl.advantage.args.rewards: advantage 'group_norm' gets 'rewards' from the run"),
    ("engine.args.model=x", "engine.args.model: engine 'fast' gets 'model' from the run itself"),
    ("rl.overlong={name: soft_penalty, args: {cahce: 4}}", "rl.overlong.args.cahce: overlong 'soft_penalty' takes no"),
])
def test_component_args_are_checked_against_the_entry_at_load(override, line):
    with pytest.raises(ConfigError, match=line.replace("(", r"\(")):
        load_config(None, [override])


def test_a_plugin_component_named_in_the_config_loads(tmp_path):
    plugin = tmp_path / "my_loss.py"
    plugin.write_text("from posttrain.registry import loss\n\n"
                      "@loss('my_clip_loss', units='tokens')\n"
                      "def my_clip_loss(logp, old_logp, adv, mask, **_):\n    return (-(adv[:, None] * logp) * mask).sum(), {}\n")
    p = tmp_path / "c.yaml"
    p.write_text("plugins: [my_loss.py]\nrl: {loss: my_clip_loss}\n")
    assert load_config(p).rl.loss.name == "my_clip_loss"


def test_a_cli_plugin_is_imported_before_the_names_are_checked(tmp_path):
    plugin = tmp_path / "my_adv.py"
    plugin.write_text("import torch\nfrom posttrain.registry import advantage\n\n"
                      "@advantage('my_adv', min_group=2, scope='group')\n"
                      "def my_adv(rewards, mask, scale=1.0):\n    return scale * (rewards - rewards.mean()) * mask\n")
    cfg = load_config(None, ["rl.advantage={name: my_adv, args: {scale: 2.0}}"], plugins=[plugin])
    assert cfg.plugins == [str(plugin.resolve())] and cfg.rl.advantage.args == {"scale": 2.0}


def test_advantage_args_reach_the_estimator(tmp_path):
    from posttrain.train.advantages import estimate_advantages
    from posttrain.types import Trajectory, Turn, VerifyResult

    plugin = tmp_path / "scaled_adv.py"
    plugin.write_text("from posttrain.registry import advantage\n\n"
                      "@advantage('scaled_mean', min_group=2, scope='group')\n"
                      "def scaled_mean(rewards, mask, scale=1.0):\n"
                      "    mean = (rewards * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)\n"
                      "    return scale * (rewards - mean) * mask\n")
    cfg = load_config(None, ["rl.advantage={name: scaled_mean, args: {scale: 3.0}}"], plugins=[plugin])
    group = [Trajectory("t", "v", "d", (1,), (Turn("assistant", "x", (1,), (-0.1,)),), reward=r,
                        verify=VerifyResult(r, r > 0.5), sample=i) for i, r in enumerate((1.0, 0.0))]
    adv = estimate_advantages([group], cfg.rl.advantage.name, cfg.rl.advantage.args)
    assert adv.tolist() == [1.5, -1.5]  # 3 x (r - 0.5)


@pytest.mark.parametrize("override", [
    "model.dtype=fp8", "trainer.precision=fp16", "trainer.launcher=slurm", "trainer.mixed_precision=fp16",
    "cluster.weight_sync=nccl", "cluster.collective_backend=mpi", "rl.prefix_layout=flash", "rl.stale_lr=sqrt",
    "rl.loss_norm=tokens", "rl.infra_error.action=ignore", "rl.offpolicy.action=ignore", "rl.optim.schedule=linear",
])
def test_an_enumerated_setting_outside_its_choices_is_refused_at_load(override):
    with pytest.raises(ConfigError, match=rf"bad value for config key '{override.split('=')[0]}'.*Input should be"):
        load_config(None, [override])


# Plain-string settings that are free text (a path, an address, a run name), not a choice among values:
# every other string setting is a Literal or a registry name (`Registered`), checked at load.
FREE_TEXT = {"name", "out_dir", "model.path", "tasks.files", "tasks.heldout_files", "sft.data", "sft.eval_data",
             "dpo.data", "dpo.from_run", "trainer.lora.target_modules", "schedule.curriculum.domains",
             "schedule.curriculum.exclude", "cluster.address", "cluster.sandbox_resource", "cluster.rollout_resource",
             "agent.external.command", "agent.external.entry", "log.project", "models.path", "models.url",
             "models.model", "models.api_key_env", "distill.teacher.path", "distill.teacher.url", "distill.teacher.model",
             "distill.teacher.api_key_env", "plugins"}  # distill.teacher: a models entry (path, URL, model id, env var)


def _string_fields(model: type[BaseModel], prefix: str = "", registered: bool = False):
    """(dotted key, is it registered) for every str / str | None / list[str] field in the schema."""
    for fname, info in model.model_fields.items():
        ann, key = info.annotation, f"{prefix}{fname}"
        reg = registered and fname == "name" or any(isinstance(m, Registered) for m in info.metadata)
        args = typing.get_args(ann)
        nested = [a for a in (ann, *args, *(b for a in args for b in typing.get_args(a)))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        for sub in nested:
            yield from _string_fields(sub, f"{key}.", reg)
        if not nested and (ann is str or ann == str | None or ann == list[str] or ann == list[str] | None):
            yield key, reg


def test_every_string_setting_is_a_literal_a_registry_name_or_free_text():
    unchecked = {k for k, reg in _string_fields(RunConfig) if not reg}
    assert unchecked == FREE_TEXT, f"new free-form string settings: {sorted(unchecked - FREE_TEXT)}"
