"""Rollout: engines (`hf` reference, `fast` default, `vllm` optional GPU backend) and the loops
that drive them. Importing registers all three; vllm itself is imported only when a `vllm`
engine is built (engines/vllm.py), so the registry works without the package."""

from __future__ import annotations

import importlib
from typing import Any

from posttrain.rollout.engine import Completion, Engine, GenRequest, SamplingParams

for _mod in ("posttrain.rollout.engines.hf", "posttrain.rollout.fast.engine", "posttrain.rollout.engines.vllm"):
    try:
        importlib.import_module(_mod)  # registers the engine
    except ModuleNotFoundError as e:  # `fast` may be absent in a partial checkout
        if e.name != _mod:
            raise


def make_engine(name: str, model: Any, tokenizer: Any, **args: Any) -> Engine:
    """The engine `name` with its keyword arguments; a bad argument is a one-line ConfigError."""
    from posttrain.config_check import ENGINE_RESERVED, check_kwargs
    from posttrain.errors import ConfigError
    from posttrain.registry import registry

    factory = registry("engine").get(name)
    # check_config does this for a run's config; callers that skip it (eval, Ray workers) meet it here
    check_kwargs(factory, args, "engine.args", f"engine {name!r}", reserved=ENGINE_RESERVED)
    try:
        return factory(model=model, tokenizer=tokenizer, **args)
    except TypeError as e:  # a value of the wrong type (cache_mb="big"): name the engine and its arguments
        raise ConfigError(f"engine {name!r} cannot be built with engine.args {args}: {e}") from e


__all__ = ["Completion", "Engine", "GenRequest", "SamplingParams", "make_engine"]
