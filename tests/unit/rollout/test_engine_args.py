"""engine.args has one truth, each engine's signature: an unknown key is refused by name, a bad
value is a ConfigError naming it, and a bug inside an engine is not dressed up as either."""

from __future__ import annotations

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config
from posttrain.errors import ConfigError
from posttrain.rollout import make_engine


def test_hf_refuses_an_unknown_engine_arg_in_the_config_naming_it():
    with pytest.raises(ConfigError, match=r"^engine.args.foo: engine 'hf' takes no argument 'foo'; it takes: max_batch$"):
        check_config(load_config(None, ["engine.name=hf", "engine.args.foo=1"]))


def test_make_engine_refuses_an_unknown_hf_arg_before_building_anything():
    # model and tokenizer are None: the key is refused before the engine's constructor runs
    with pytest.raises(ConfigError, match=r"engine.args.foo: engine 'hf' takes no argument 'foo'"):
        make_engine("hf", None, None, foo=1)


def test_hf_max_batch_of_the_wrong_type_is_a_config_error_naming_it(tiny):
    with pytest.raises(ConfigError, match=r"engine.args.max_batch must be an integer >= 1, got '8'"):
        make_engine("hf", *tiny, max_batch="8")


def test_fast_cache_mb_of_the_wrong_type_is_a_config_error_naming_it(tiny):
    # YAML 1.1 reads `1e3` as a string: refused by name, not a TypeError deep in the engine
    with pytest.raises(ConfigError, match=r"engine.args.cache_mb must be a number of MiB > 0, got '1e3'"):
        make_engine("fast", *tiny, cache_mb="1e3")
