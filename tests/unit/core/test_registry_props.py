"""Facts about an algorithm are declared where it registers, and checked there."""

import dataclasses

import pytest

from posttrain.registry import PROPERTIES, loss, registry, verifier
from posttrain.types import Spec


def test_a_loss_without_units_fails_when_it_registers():
    # before: a plugin loss missing from a table keyed by name was silently weighted by sequences
    with pytest.raises(ValueError, match=r"loss 'test_unitless' must declare units= when it registers \(one of 'tokens', 'sequences'\)"):
        registry("loss").register("test_unitless")
    with pytest.raises(TypeError):
        loss("test_unitless")


def test_a_value_outside_the_choices_or_an_unknown_property_fails():
    with pytest.raises(ValueError, match="units='words' is not one of"):
        loss("test_words", units="words")
    with pytest.raises(ValueError, match="unknown property colour="):
        registry("loss").register("test_colour", units="tokens", colour="red")
    with pytest.raises(ValueError, match="min_group='2' is not a int"):
        registry("advantage").register("test_str_min", min_group="2", scope="group")


def test_every_builtin_declares_its_properties():
    for kind, declared in PROPERTIES.items():
        for name in registry(kind).names():
            assert set(registry(kind).props(name)) == set(declared), (kind, name)


def test_the_builtin_losses_declare_the_units_their_formulas_use():
    units = {n: registry("loss").props(n)["units"] for n in ("grpo", "dapo", "dr_grpo", "gspo", "cispo")}
    assert units == {"grpo": "sequences", "dapo": "tokens", "dr_grpo": "sequences", "gspo": "sequences",
                     "cispo": "tokens"}


def test_a_plugin_verifier_declaring_code_gets_the_code_format_rule():
    from posttrain.tasks.arithmetic import Arithmetic
    from posttrain.verifiers.rules import CODE, rule_for

    @verifier("test_runs_programs", answer_format="code")
    class RunsPrograms:
        async def __call__(self, task, traj, ctx): ...

    task = Arithmetic().generate(1, seed=0)[0]
    coded = dataclasses.replace(task, verifier=Spec("test_runs_programs"))
    assert rule_for(coded) == CODE and rule_for(task).single_line


def test_a_composite_lets_its_inner_verifiers_decide():
    from posttrain.tasks.arithmetic import Arithmetic
    from posttrain.verifiers.rules import CODE, rule_for

    task = Arithmetic().generate(1, seed=0)[0]
    spec = Spec("weighted", {"parts": [{"verifier": {"name": "python_tests"}, "weight": 1.0}]})
    assert rule_for(dataclasses.replace(task, verifier=spec)) == CODE


def test_group_size_below_the_estimators_declared_min_group_is_refused():
    from posttrain.config import load_config
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match=r"rl.group_size=1: the 'reinforce_pp' advantage .* >= 2"):
        check_config(load_config(None, ["rl.group_size=1", "rl.advantage=reinforce_pp"]))
