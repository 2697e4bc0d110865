"""Rollout: engines (`hf` reference, `fast` default, `vllm` optional GPU backend) and the loops
that drive them. Importing registers all three; vllm itself is imported only when a `vllm`
engine is built (engines/vllm.py), so the registry works without the package."""

from __future__ import annotations

import importlib
from typing import Any

from posttrain.rollout.engine import Completion, Engine, GenRequest, SamplingParams

for _mod in ("posttrain.rollout.engines.hf", "posttrain.rollout.engines.fast.engine", "posttrain.rollout.engines.vllm"):
    try:
        importlib.import_module(_mod)  # registers the engine
    except ModuleNotFoundError as e:  # `fast` may be absent in a partial checkout
        if e.name != _mod:
            raise


def make_engine(name: str, model: Any, tokenizer: Any, **args: Any) -> Engine:
    """The engine `name` with its keyword arguments; an unknown one is a one-line ConfigError.

    Only mistakes in the call itself read as config errors: an unknown or reserved key (the
    signature check), or a required argument missing. Anything the engine's own code raises,
    a TypeError included, surfaces as itself: engines check their values and raise
    ConfigError for a bad one, so a TypeError from inside is a bug, not a config mistake."""
    from posttrain.config_check import ENGINE_RESERVED
    from posttrain.errors import ConfigError
    from posttrain.registry import check_kwargs, registry

    factory = registry("engine").get(name)
    # check_config does this for a run's config; callers that skip it (eval, Ray workers) meet it here
    check_kwargs(factory, args, "engine.args", f"engine {name!r}", reserved=ENGINE_RESERVED)
    try:
        return factory(model=model, tokenizer=tokenizer, **args)
    except TypeError as e:
        if e.__traceback__ is not None and e.__traceback__.tb_next is not None:
            raise  # raised inside the engine (a frame below this call): not the call's arguments
        raise ConfigError(f"engine {name!r} cannot be built with engine.args {args}: {e}") from None


__all__ = ["Completion", "Engine", "GenRequest", "SamplingParams", "make_engine"]
