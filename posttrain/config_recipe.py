"""A recipe's own settings: `recipe.<name>:` in a run config, declared where the recipe is registered.

    @recipe("agent", settings=AgentRecipeSettings)      # recipes/agent.py: the section lives with its recipe
    class AgentRecipe: ...

    r = recipe_settings(cfg, "agent")                   # AgentRecipeSettings, defaults filled in

The global schema (config_schema.py) holds what more than one recipe reads; a key that one recipe alone
reads (the `rl` recipe's warm-up stop rule, the `agent` recipe's warm-ups and budget) is that recipe's.
`RunConfig.recipe` keeps the raw mapping per recipe name; `check_recipe_settings` (called by
config.load_config after the plugins are imported, so a plugin recipe's settings are checked too)
validates each against its recipe's section, with the same one-line errors as the schema's. The keys
that lived in the global schema before still load, moved here with a deprecation warning
(LEGACY_RECIPE_KEYS).
"""

from __future__ import annotations

import difflib
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from posttrain.errors import ConfigError
from posttrain.registry import registry

# old (section, key) -> its place now. `agent.recipe.rl_minutes` -> `recipe.agent.rl_minutes`.
LEGACY_RECIPE_KEYS: dict[tuple[str, str], tuple[str, ...]] = {
    ("agent", "recipe"): ("recipe", "agent"),
    ("sft", "stop_at_pass"): ("recipe", "rl", "stop_at_pass"),
    ("sft", "check_every"): ("recipe", "rl", "check_every"),
    ("sft", "val_per_domain"): ("recipe", "rl", "val_per_domain"),
}

Warn = Callable[[str, str], None]  # (old key, new key) -> the deprecation warning


def move_legacy_recipe_keys(tree: dict[str, Any], warn: Warn) -> dict[str, Any]:
    """One layer (preset, YAML) with LEGACY_RECIPE_KEYS moved under `recipe:`; a key given both ways with
    different values is a ValueError naming both. `tree` itself is not changed."""
    out = dict(tree)
    for (section, key), new in LEGACY_RECIPE_KEYS.items():
        if not isinstance(out.get(section), dict) or key not in out[section]:
            continue
        out[section] = dict(out[section])
        value = out[section].pop(key)
        warn(f"{section}.{key}", ".".join(new))
        node = out
        for k in new[:-1]:
            node[k] = dict(node.get(k) or {})
            node = node[k]
        if new[-1] in node and node[new[-1]] != value:
            raise ValueError(f"{section}.{key}={value!r} and {'.'.join(new)}={node[new[-1]]!r} disagree; "
                             f"set {'.'.join(new)} only")
        node[new[-1]] = value
    return out


def migrate_recipe_key(dotted: str, warn: Warn) -> str:
    """An override's dotted key in its place now (`sft.stop_at_pass` -> `recipe.rl.stop_at_pass`)."""
    keys = dotted.split(".")
    new = LEGACY_RECIPE_KEYS.get(tuple(keys[:2])) if len(keys) >= 2 else None  # type: ignore[call-overload]
    if new is None:
        return dotted
    moved = ".".join([*new, *keys[2:]])
    warn(dotted, moved)
    return moved


def _settings_class(name: str) -> type[BaseModel]:
    recipes = registry("recipe")
    if name not in recipes:
        close = difflib.get_close_matches(name, recipes.names(), n=1, cutoff=0.6)
        hint = f" (did you mean 'recipe.{close[0]}'?)" if close else ""
        raise ConfigError(f"config key 'recipe.{name}': {name!r} is not a registered recipe{hint}; "
                          f"known: {', '.join(recipes.names()) or 'none'}")
    settings = recipes.props(name)["settings"]
    if settings is None:
        with_settings = [n for n in recipes.names() if recipes.props(n)["settings"] is not None]
        raise ConfigError(f"config key 'recipe.{name}': the {name} recipe takes no settings; "
                          f"recipes with settings: {', '.join(with_settings) or 'none'}")
    return settings


def _error(err: ValidationError, name: str, settings: type[BaseModel], source: str) -> str:
    """Every problem at once, each key written in full (`recipe.agent.n_train`), as config.py does."""
    out = []
    for e in err.errors():
        key = ".".join(["recipe", name, *map(str, e["loc"])])
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(e["loc"][-1]), list(settings.model_fields), n=1, cutoff=0.6)
            hint = f" (did you mean 'recipe.{name}.{close[0]}'?)" if close and len(e["loc"]) == 1 else ""
            out.append(f"unknown config key {key!r}{hint} in {source}")
        else:
            out.append(f"bad value for config key {key!r} in {source}: {e['msg']}")
    return "; ".join(out)


def recipe_settings(cfg: Any, name: str, source: str = "the run config") -> Any:
    """Recipe `name`'s settings from `cfg.recipe[name]`, its defaults filled in; a ConfigError naming the
    key when one is unknown or out of range, or when the recipe declares no settings."""
    settings = _settings_class(name)
    try:
        return settings.model_validate(cfg.recipe.get(name) or {})
    except ValidationError as e:
        raise ConfigError(_error(e, name, settings, source)) from None


def check_recipe_settings(cfg: Any, source: str) -> None:
    """Every `recipe.<name>` in `cfg` names a registered recipe with settings, and its keys are valid."""
    for name in cfg.recipe:
        recipe_settings(cfg, name, source)


def with_resolved_settings(cfg: Any, name: str) -> Any:
    """`cfg` with recipe `name`'s settings written out in full (defaults included), for the run's
    config.yaml: a resumed run reads the values it started with. `cfg` itself is not changed."""
    if registry("recipe").props(name)["settings"] is None:
        return cfg
    resolved = recipe_settings(cfg, name).model_dump(mode="json")
    return cfg.model_copy(update={"recipe": {**cfg.recipe, name: resolved}})
