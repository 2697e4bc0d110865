"""Run configs: pydantic models loaded from YAML plus dotted CLI overrides.

    cfg = load_config("examples/tiny_rl.yaml", ["rl.steps=20", "rl.optim.lr=3e-4"])

Precedence, each layer merged deeply over the one before: a preset (a recipe's YAML in
posttrain/recipes/presets, passed as `base`) <- the YAML file <- dotted overrides. So a
YAML `rl: {steps: 10}` over a preset changes rl.steps and keeps the preset's rl.lr. A
YAML value of null deletes that key of the preset (e.g. drop one of a preset's domains
with `tasks: {domains: {ui: null}}`).

Every section forbids unknown keys, so a typo is an error that names the key and the
file, never a silently ignored setting. Numeric ranges and enumerated values (Literals) are
checked here too, and so is every registry name: a named component has one shape,
`{name: <registry name>, args: {...}}` (`rl.loss`, `rl.advantage`, `rl.offpolicy`,
`rl.overlong`, `engine`, `schedule`; a bare string `rl.loss: dapo` is shorthand for
`{name: dapo, args: {}}`), and after validation its name is looked up in its registry and its
args against the entry's signature (`check_registered`; the config's `plugins:` are imported
first, and the built-ins must be loaded: `posttrain.builtins.load_builtins()`, as the CLI does).
A layer that names another component than the layer below replaces it whole (its args do not
carry over). What needs files or a model (domains, task files, the engine against the model) is
`posttrain.config_check.check_config`'s, which every command calls before any model work.
Older key shapes still load, with a one-line ConfigDeprecationWarning (a FutureWarning): `rl.lr` -> `rl.optim.lr` (and the
other LEGACY_OPTIM_KEYS), `rl.loss_args` -> `rl.loss.args`, `schedule.policy` -> `schedule.name`,
`agent.recipe.*` -> `recipe.agent.*`, `sft.stop_at_pass` -> `recipe.rl.stop_at_pass` (config_recipe.py:
a recipe's own settings are declared by the recipe and checked here, after the plugins are imported).
Values computed at run time do not live here.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import yaml
from pydantic import ValidationError

from posttrain.config_schema import (  # noqa: F401  re-exported: the sections are part of this module's API
    Section,
    OptimConfig,
    TinyModelConfig,
    TowerPretrainConfig,
    TinyVisionConfig,
    ModelConfig,
    DomainConfig,
    TasksConfig,
    SFTConfig,
    LoraConfig,
    TrainerConfig,
    DPOConfig,
    InfraErrorConfig,
    OffPolicyConfig,
    LongTailConfig,
    RLConfig,
    EngineConfig,
    SandboxConfig,
    ScheduleConfig,
    EvalConfig,
    ExternalAgentConfig,
    AgentConfig,
    ClusterConfig,
    LogConfig,
    RunConfig,
)
from posttrain.config_components import (
    LEGACY_COMPONENT_KEYS,
    Component,
    component_paths,
    move_legacy_component_keys,
    registered_fields,
)
from posttrain.config_optim import LEGACY_OPTIM_KEYS, move_legacy_optim_keys
from posttrain.config_recipe import check_recipe_settings, migrate_recipe_key, move_legacy_recipe_keys
from posttrain.errors import ConfigError
from posttrain.registry import check_kwargs, registry


def _set_dotted(tree: dict[str, Any], dotted: str, raw: str, defaults: dict[str, Any] | None = None) -> None:
    """Set one override. A section the tree lacks starts from its default value, so that
    `tasks.domains.code.args.form=shift` edits the default `code` domain and keeps the
    other default domains, instead of replacing the whole `tasks.domains` mapping."""
    keys = dotted.split(".")
    node, dflt = tree, defaults
    components = component_paths(RunConfig)
    for i, k in enumerate(keys[:-1]):
        dflt = dflt.get(k) if isinstance(dflt, dict) else None
        if k not in node and isinstance(dflt, dict):
            node[k] = copy.deepcopy(dflt)
        if isinstance(node.get(k), str) and tuple(keys[: i + 1]) in components:  # `rl.loss=gspo rl.loss.args.x=1`
            node[k] = {"name": node[k]}
        nxt = node.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"override {dotted!r}: {k!r} is not a section")
        node = nxt
    node[keys[-1]] = yaml.safe_load(raw) if raw != "" else ""


def _fields_at(loc: Sequence[Any]) -> list[str]:
    """The keys the schema allows at `loc` (a dotted path into RunConfig; a mapping of sections,
    like tasks.domains, is stepped over by its key)."""
    import typing

    from pydantic import BaseModel

    model: Any = RunConfig
    for part in loc:
        field = model.model_fields.get(str(part)) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return []
        ann = field.annotation
        args = [a for a in typing.get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)]
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        elif args:  # Optional[Section] or dict[str, Section]: the section
            model = args[-1]
        else:
            return []
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _unknown_key(loc: tuple[Any, ...]) -> str:
    import difflib

    key = ".".join(str(p) for p in loc)
    parent = [p for p in loc[:-1] if not isinstance(p, int)]
    # a key under a mapping of sections (tasks.domains.NAME.x) looks the section up without NAME
    allowed = _fields_at(parent) or _fields_at([p for i, p in enumerate(parent) if i != len(parent) - 1])
    if len(parent) == 1 and parent[0] in LEGACY_OPTIM_KEYS:  # rl.lr, rl.warmup_steps, ... are still read
        allowed = [*allowed, *LEGACY_OPTIM_KEYS[parent[0]]]
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    hint = f" (did you mean {'.'.join([*map(str, loc[:-1]), close[0]])!r}?)" if close else ""
    return f"{key!r}{hint}"


def _format_error(err: ValidationError, source: str) -> str:
    """Every problem at once: all unknown keys (each with its closest known key), then bad values."""
    errors = err.errors()
    unknown = [_unknown_key(tuple(e["loc"])) for e in errors if e["type"] == "extra_forbidden"]
    bad = [f"bad value for config key {'.'.join(str(p) for p in e['loc'])!r} in {source}: {e['msg']}"
           for e in errors if e["type"] != "extra_forbidden"]
    parts = [f"unknown config key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in {source}"] if unknown else []
    return "; ".join(parts + bad)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`: mappings merge key by key, anything else replaces;
    a None in `over` deletes that key (how a YAML drops a preset's domain)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def read_yaml_tree(path: str | Path) -> dict[str, Any]:
    """A config YAML file as a mapping; errors name the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        loaded = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{p}: top level must be a mapping of config sections")
    return loaded


def _resolve_paths(loaded: dict[str, Any], base: Path) -> dict[str, Any]:
    """The one rule for paths: a path a YAML file names is relative to that file (`plugins:`,
    `tasks.files`), stored absolute so a resume from another directory finds them; a path given
    on the command line (an override, --plugin) is relative to the current directory."""
    def absolute(items: Any) -> Any:
        if not isinstance(items, list):
            return items
        return [str((base / p).resolve()) if isinstance(p, str) else p for p in items]

    out = dict(loaded)
    if "plugins" in loaded:
        out["plugins"] = absolute(loaded["plugins"])
    tasks = loaded.get("tasks")
    if isinstance(tasks, dict) and "files" in tasks:
        out["tasks"] = {**tasks, "files": absolute(tasks["files"])}
    return out


class ConfigDeprecationWarning(FutureWarning):
    """A config key in an older shape: still read; the CLI prints it as one line (cli/main.py)."""


def _deprecated(old: str, new: str, where: str) -> None:
    warnings.warn(f"config key {old} ({where}) is deprecated: write {new}", ConfigDeprecationWarning, stacklevel=4)


def _migrate_section(name: str, value: Any, where: str) -> Any:
    """One section of one layer with its legacy keys moved (LEGACY_OPTIM_KEYS, LEGACY_COMPONENT_KEYS)."""
    if not isinstance(value, dict):
        return value
    for old, new in LEGACY_OPTIM_KEYS.get(name, {}).items():
        if old in value:
            _deprecated(f"{name}.{old}", f"{name}.optim.{new}", where)
    for old, (new, sub) in LEGACY_COMPONENT_KEYS.get(name, {}).items():
        if old in value:
            _deprecated(f"{name}.{old}", ".".join(p for p in (name, new, sub) if p), where)
    if name in LEGACY_OPTIM_KEYS:
        value = move_legacy_optim_keys(name, value)
    return move_legacy_component_keys(name, value) if name in LEGACY_COMPONENT_KEYS else value


def _migrate_tree(tree: dict[str, Any], where: str = "defaults") -> dict[str, Any]:
    """One layer (preset or YAML) with its legacy keys moved (`rl.lr` -> `rl.optim.lr`, `rl.loss_args` ->
    `rl.loss.args`) and every component's shorthand name spelled `{name: ...}`, before the layers merge,
    so a later layer's `rl.optim.lr` still wins over an earlier layer's `rl.lr`."""
    try:
        tree = move_legacy_recipe_keys(tree, lambda old, new: _deprecated(old, new, where))
        out = {k: _migrate_section(k, v, where) for k, v in tree.items()}
    except ValueError as e:
        raise ConfigError(f"{e} ({where})") from None
    for path in component_paths(RunConfig):
        parent = _at(out, path[:-1])
        if isinstance(parent, dict) and isinstance(parent.get(path[-1]), str):
            parent[path[-1]] = {"name": parent[path[-1]]}
    return out


def _at(tree: Any, path: Sequence[str]) -> Any:
    """The node of `tree` at `path`, or None."""
    for k in path:
        tree = tree.get(k) if isinstance(tree, dict) else None
    return tree


def _merge_layer(tree: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`layer` merged over `tree` (deep_merge), except that a component `layer` names differently
    from `tree` starts afresh: the earlier component's args are not the new one's."""
    tree = copy.deepcopy(tree)
    for path in component_paths(RunConfig):
        new, old_parent = _at(layer, path), _at(tree, path[:-1])
        old = old_parent.get(path[-1]) if isinstance(old_parent, dict) else None
        if isinstance(new, dict) and isinstance(old, dict) and "name" in new and new["name"] != old.get("name"):
            del old_parent[path[-1]]
    return deep_merge(tree, layer)


def _migrate_key(dotted: str) -> str:
    """`rl.lr` -> `rl.optim.lr`, `rl.loss_args.x` -> `rl.loss.args.x`, `schedule.policy` -> `schedule.name`
    for an override (config_optim.LEGACY_OPTIM_KEYS, LEGACY_COMPONENT_KEYS)."""
    dotted = migrate_recipe_key(dotted, lambda old, new: _deprecated(old, new, "override"))
    keys = dotted.split(".")
    if len(keys) == 2 and keys[1] in LEGACY_OPTIM_KEYS.get(keys[0], {}):
        new = f"{keys[0]}.optim.{LEGACY_OPTIM_KEYS[keys[0]][keys[1]]}"
    elif len(keys) >= 2 and keys[1] in LEGACY_COMPONENT_KEYS.get(keys[0], {}):
        new_key, sub = LEGACY_COMPONENT_KEYS[keys[0]][keys[1]]
        new = ".".join([keys[0], new_key, *([sub] if sub else []), *keys[2:]])
    else:
        return dotted
    _deprecated(dotted, new, "override")
    return new


def load_plugin(path: str | Path) -> ModuleType:
    """Import the plugin file at `path` once (by resolved path); its decorators register its components.
    It lives here, below every package, because a config's registry names are checked against it at load."""
    p = Path(path).resolve()
    if not p.is_file() or p.suffix != ".py":
        raise ConfigError(f"{path}: plugin must be an existing .py file")
    name = f"posttrain_plugin_{p.stem}_{hashlib.sha256(str(p).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: cannot import this file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[name]
        raise ConfigError(f"{path}: plugin failed to import: {type(e).__name__}: {e}") from None
    return mod


def check_registered(cfg: RunConfig) -> None:
    """Every registry name in `cfg` (fields marked `Registered` in config_schema) is registered, and a
    component's args are keywords its entry takes; a one-line ConfigError names the key and lists the
    registered names. The config's plugins must be imported first (load_config does it)."""
    import difflib

    for key, reg, value in registered_fields(cfg):
        items = [(f"{key}.name", value.name, value.args)] if isinstance(value, Component) else \
            [(key, v, {}) for v in value] if isinstance(value, list) else [(key, value, {})]
        entries = registry(reg.kind)
        for where, name, args in items:
            if name not in entries:
                close = difflib.get_close_matches(name, entries.names(), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                known = ", ".join(entries.names()) or "none (posttrain.builtins.load_builtins() loads the built-ins)"
                raise ConfigError(f"{where}={name!r} is not a registered {reg.kind}{hint}; known: {known}")
            if reg.check_args:
                check_kwargs(entries.get(name), args, f"{key}.args", f"{reg.kind} {name!r}", reserved=reg.reserved)


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None,
                plugins: Sequence[str | Path] = ()) -> RunConfig:
    """Load `base` (a preset) <- YAML (optional) <- `key.sub=value` overrides, deep-merged, then
    validate: the schema, then every registry name (the config's `plugins:` and `plugins`, e.g. the
    CLI's --plugin files, imported first and added to cfg.plugins). Errors name the key and the file."""
    tree: dict[str, Any] = _migrate_tree(copy.deepcopy(base or {}), "preset")
    source = "defaults"
    if path is not None:
        source = str(path)
        loaded = read_yaml_tree(path)
        tree = _merge_layer(tree, _migrate_tree(_resolve_paths(loaded, Path(path).parent), source))
    defaults = RunConfig().model_dump(mode="json") if overrides else None
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(f"override {ov!r} must look like key.sub=value")
        k, v = ov.split("=", 1)
        _set_dotted(tree, _migrate_key(k.strip()), v, defaults)
    files = (tree.get("tasks") or {}).get("files") if isinstance(tree.get("tasks"), dict) else None
    if isinstance(files, list):  # an override's paths are the current directory's: stored absolute for a resume
        tree["tasks"]["files"] = [str(Path(f).resolve()) if isinstance(f, str) else f for f in files]
    try:
        cfg = RunConfig.model_validate(tree)
    except ValidationError as e:
        where = source if not overrides else f"{source} (with overrides {' '.join(overrides)})"
        raise ConfigError(_format_error(e, where)) from None
    cfg.plugins = [*cfg.plugins, *(f for f in (str(Path(p).resolve()) for p in plugins) if f not in cfg.plugins)]
    for plugin in cfg.plugins:
        load_plugin(plugin)
    check_registered(cfg)
    check_recipe_settings(cfg, source)
    return cfg


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
