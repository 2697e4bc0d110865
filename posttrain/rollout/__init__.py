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
    from posttrain.registry import registry

    return registry("engine").get(name)(model=model, tokenizer=tokenizer, **args)


__all__ = ["Completion", "Engine", "GenRequest", "SamplingParams", "make_engine"]
