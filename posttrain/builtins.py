"""The built-in implementations of every extension point, loaded by one explicit call.

    from posttrain.builtins import load_builtins
    load_builtins()        # the CLI does this at start; tests/conftest.py for the test suite

Each module below registers its implementations when imported (`@verifier(...)`, `@loss(...)`,
...). This table lives here, at the top of the layering (beside `cli`), because it names
modules of every layer; `registry.py` (layer 2) names none and imports nothing lazily. Code
that consumes a registry imports the package that registers its built-ins where the layering
allows (the verifiers, tasks, rollout, schedule packages register theirs in `__init__`); the
rest (config checks, listings) runs after this call.
"""

from __future__ import annotations

import importlib

# kind -> modules whose import registers the built-in implementations of that kind.
BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "verifier": ("posttrain.verifiers", "posttrain.longctx.reward"),
    "domain": ("posttrain.tasks",),
    "domain_check": ("posttrain.tasks",),  # per-domain load-time checks (args, difficulty range): tasks/reasoning_gym.py
    "domain_family": ("posttrain.tasks",),  # prefix -> one-line error for an unknown member (rg-)
    "engine": ("posttrain.rollout",),
    "loss": ("posttrain.train.losses",),
    "dpo_loss": ("posttrain.train.losses",),
    "advantage": ("posttrain.train.advantages",),
    "kl": ("posttrain.train.losses",),
    "offpolicy": ("posttrain.train.offpolicy",),
    "sched_policy": ("posttrain.schedule",),
    "tool": ("posttrain.rollout.agent.tools",),
    "speculator": ("posttrain.rollout.engines.fast.speculative",),
    "longctx_reader": ("posttrain.longctx.reader",),
    "detector": ("posttrain.eval.detectors",),
    "tracker": ("posttrain.store.trackers",),
    "model_backend": ("posttrain.models.service_openai", "posttrain.rollout.service_local"),  # models/service.py
    "overlong": ("posttrain.verifiers.overlong",),  # rl.overlong: truncated completions gated, scored or penalised
    "recipe": tuple(f"posttrain.recipes.{m}" for m in ("quickstart", "vision", "agent", "sft", "dpo", "distill")),  # pipeline.py
}


def load_builtins() -> None:
    """Import every module that registers a built-in (idempotent: imports are cached)."""
    for mods in BUILTIN_MODULES.values():
        for mod in mods:
            importlib.import_module(mod)
