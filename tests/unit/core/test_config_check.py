"""check_config: every registry name, file and the engine/model pair, before any model work."""

import json
import subprocess
import sys
import textwrap

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config
from posttrain.errors import ConfigError


@pytest.mark.parametrize("override, named", [
    ("rl.loss=ppo", "rl.loss.name='ppo'"), ("rl.advantage=magic", "rl.advantage.name='magic'"),
    ("engine.name=nope", "engine.name='nope'"), ("schedule.name=greedy", "schedule.name='greedy'"),
    ("tasks.domains.nosuch={}", "tasks.domains.nosuch"),
])
def test_unknown_registry_name_is_named_with_the_known_ones(override, named):
    with pytest.raises(ConfigError, match=rf"{named}.*known: "):
        check_config(load_config(None, [override]))


def test_kl_estimator_is_checked_when_kl_is_on():
    with pytest.raises(ConfigError, match="rl.kl_estimator.name='k9'"):
        check_config(load_config(None, ["rl.kl_coef=0.1", "rl.kl_estimator=k9"]))


def test_dpo_loss_is_checked_for_dpo():
    with pytest.raises(ConfigError, match="dpo.loss.name='hinge'"):
        check_config(load_config(None, ["dpo.loss=hinge"]), needs=("dpo",))


def test_group_relative_advantage_needs_two_samples():
    with pytest.raises(ConfigError, match="rl.group_size=1"):
        check_config(load_config(None, ["rl.group_size=1"]))


def test_missing_task_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="task file not found: .*absent.jsonl"):
        check_config(load_config(None, [f"tasks.files=[{tmp_path}/absent.jsonl]"]))


def test_model_path_without_config_json_is_named(tmp_path):
    with pytest.raises(ConfigError, match="not a model directory"):
        check_config(load_config(None, [f"model.path={tmp_path}"]))


def test_plugin_domain_becomes_trainable_by_name(tmp_path):
    """In a fresh interpreter: the plugin's registration must not leak into other tests' registry."""
    plugin = tmp_path / "my_domain.py"
    plugin.write_text(textwrap.dedent("""
        from posttrain.registry import domain
        from posttrain.tasks.arithmetic import Arithmetic

        @domain("my_plugin_arith")
        class Mine(Arithmetic):
            pass
    """))
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from posttrain.builtins import load_builtins
        from posttrain.config import load_config
        from posttrain.config_check import check_config
        load_builtins()  # as the CLI does
        cfg = load_config(None, ["plugins=[{plugin}]", "tasks.domains={{my_plugin_arith: {{n_train: 5}}}}"])
        check_config(cfg)  # no error: the plugin registered the domain before the names were checked
    """)], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr[-800:]


def test_every_registered_name_is_reachable_from_a_fresh_interpreter():
    """Each kind's names, listed in one interpreter, each looked up by name in another, after the
    one explicit call that loads the built-ins (posttrain/builtins.py)."""
    from posttrain.builtins import BUILTIN_MODULES

    kinds = sorted(BUILTIN_MODULES)  # every kind with built-ins, so a new kind cannot be forgotten here
    assert {"recipe", "engine", "offpolicy"} <= set(kinds)
    listing = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import json
        from posttrain.builtins import load_builtins
        from posttrain.registry import registry
        load_builtins()
        print(json.dumps({{k: registry(k).names() for k in {kinds!r}}}))
    """)], capture_output=True, text=True, check=True)
    names = json.loads(listing.stdout)
    assert all(names[k] for k in kinds), {k: v for k, v in names.items() if not v}
    assert "vllm" in names["engine"] and "sigmoid" in names["dpo_loss"]
    # a second fresh interpreter looks every name up after the one call: since load_builtins() imports
    # every kind's modules, one interpreter for all kinds checks what one per kind did (20 start-ups, 60 s)
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from posttrain.builtins import load_builtins
        from posttrain.registry import registry
        load_builtins()
        for kind, ns in {names!r}.items():
            for n in ns:
                try:
                    registry(kind).get(n)
                except Exception as e:
                    raise SystemExit(f"{{kind}} {{n!r}}: {{e}}")
    """)], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr[-500:]


def test_engine_that_cannot_run_the_model_is_refused_at_load_naming_the_feature(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mixtral", "architectures": ["MixtralForCausalLM"]}))
    with pytest.raises(ConfigError, match=r"engine.name='fast' cannot run model.path=.*mixtral"):
        check_config(load_config(None, [f"model.path={tmp_path}", "engine.name=fast"]))
    check_config(load_config(None, [f"model.path={tmp_path}", "engine.name=hf"]))  # the reference engine runs anything


@pytest.mark.parametrize("override, named", [
    ("engine.args.bogus=1", r"engine.args.bogus: engine 'fast' takes no argument 'bogus'; it takes: max_batch"),
    ("tasks.domains.arithmetic.args.bogus=1", r"tasks.domains.arithmetic.args.bogus: domain 'arithmetic'"),
])
def test_unknown_keyword_argument_is_named_with_its_component(override, named):
    with pytest.raises(ConfigError, match=named):
        check_config(load_config(None, [override]))


def test_engine_args_may_not_set_what_the_run_passes_itself():
    with pytest.raises(ConfigError, match="engine.args.tokenizer: engine 'fast' gets 'tokenizer' from the run"):
        check_config(load_config(None, ["engine.args.tokenizer=x"]))


def test_type_error_inside_an_engine_surfaces_as_itself_not_as_a_config_error(monkeypatch):
    from posttrain.registry import registry
    from posttrain.rollout import make_engine

    def buggy(model, tokenizer, cache_mb=1.0):
        return len(cache_mb)  # a bug in the engine's own code, whatever the arguments
    monkeypatch.setitem(registry("engine")._items, "buggy", buggy)  # removed again after the test
    with pytest.raises(TypeError, match="has no len") as e:
        make_engine("buggy", None, None, cache_mb=2.0)
    assert not isinstance(e.value, ConfigError)


def test_engine_missing_a_required_argument_is_a_config_error(monkeypatch):
    from posttrain.registry import registry
    from posttrain.rollout import make_engine

    def needy(model, tokenizer, path):
        raise AssertionError("never built: the call itself is wrong")
    monkeypatch.setitem(registry("engine")._items, "needy", needy)
    with pytest.raises(ConfigError, match="engine 'needy' cannot be built with engine.args {}: .*'path'"):
        make_engine("needy", None, None)


def _task_file(path):
    from posttrain.registry import build
    from posttrain.tasks.io import save_tasks

    return save_tasks(build("arithmetic", kind="domain").generate(2, seed=10_000), path)


def test_two_copies_of_a_task_file_are_refused_naming_the_id_and_both_files(tmp_path):
    a, b = _task_file(tmp_path / "a.jsonl"), _task_file(tmp_path / "b.jsonl")
    with pytest.raises(ConfigError, match=r"repeated: 'arithmetic-10000-0' \(.*a.jsonl and .*b.jsonl\)"):
        check_config(load_config(None, [f"tasks.files=[{a}, {b}]"]))


def test_make_splits_refuses_a_file_id_that_a_generated_held_out_task_has(tmp_path):
    from posttrain.tasks.splits import make_splits

    f = _task_file(tmp_path / "a.jsonl")  # the ids of the held-out split's seed (tasks.eval_seed + seed)
    cfg = load_config(None, ["tasks.domains={arithmetic: {n_train: 4, n_eval: 4}}", f"tasks.files=[{f}]"])
    with pytest.raises(ConfigError, match=r"'arithmetic-10000-0' \(domain 'arithmetic' held-out and .*a.jsonl\)"):
        make_splits(cfg)
