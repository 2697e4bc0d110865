"""Run configs: pydantic models loaded from YAML plus dotted CLI overrides.

    cfg = load_config("examples/tiny_rl.yaml", ["rl.steps=20", "rl.lr=3e-4"])

Precedence, each layer merged deeply over the one before: a preset (a recipe's YAML in
posttrain/recipes/presets, passed as `base`) <- the YAML file <- dotted overrides. So a
YAML `rl: {steps: 10}` over a preset changes rl.steps and keeps the preset's rl.lr. A
YAML value of null deletes that key of the preset (e.g. drop one of a preset's domains
with `tasks: {domains: {ui: null}}`).

Every section forbids unknown keys, so a typo is an error that names the key and the
file, never a silently ignored setting. Numeric ranges are checked here too; the names
of registered components (losses, engines, domains, ...) are checked by
`posttrain.config_check.check_config`, which every command calls before any model work.
Values computed at run time do not live here.
"""

from __future__ import annotations

import copy
from pathlib import Path
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
    AgentRecipeConfig,
    ExternalAgentConfig,
    AgentConfig,
    ClusterConfig,
    LogConfig,
    RunConfig,
)
from posttrain.config_schema import LEGACY_OPTIM_KEYS, move_legacy_optim_keys
from posttrain.errors import ConfigError


def _set_dotted(tree: dict[str, Any], dotted: str, raw: str, defaults: dict[str, Any] | None = None) -> None:
    """Set one override. A section the tree lacks starts from its default value, so that
    `tasks.domains.code.args.form=shift` edits the default `code` domain and keeps the
    other default domains, instead of replacing the whole `tasks.domains` mapping."""
    keys = dotted.split(".")
    node, dflt = tree, defaults
    for k in keys[:-1]:
        dflt = dflt.get(k) if isinstance(dflt, dict) else None
        if k not in node and isinstance(dflt, dict):
            node[k] = copy.deepcopy(dflt)
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


def _migrate_tree(tree: dict[str, Any]) -> dict[str, Any]:
    """One layer (preset or YAML) with the pre-`optim` keys (`rl.lr`, ...) moved under `optim`, before
    the layers merge, so a later layer's `rl.optim.lr` still wins over an earlier layer's `rl.lr`."""
    try:
        return {k: move_legacy_optim_keys(k, v) if k in LEGACY_OPTIM_KEYS else v for k, v in tree.items()}
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _migrate_key(dotted: str) -> str:
    """`rl.lr` -> `rl.optim.lr` for an override (config_schema.LEGACY_OPTIM_KEYS)."""
    keys = dotted.split(".")
    if len(keys) == 2 and keys[1] in LEGACY_OPTIM_KEYS.get(keys[0], {}):
        return f"{keys[0]}.optim.{LEGACY_OPTIM_KEYS[keys[0]][keys[1]]}"
    return dotted


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None) -> RunConfig:
    """Load `base` (a preset) <- YAML (optional) <- `key.sub=value` overrides, deep-merged, then
    validate. Errors name the key and the file."""
    tree: dict[str, Any] = _migrate_tree(copy.deepcopy(base or {}))
    source = "defaults"
    if path is not None:
        source = str(path)
        loaded = read_yaml_tree(path)
        tree = deep_merge(tree, _migrate_tree(_resolve_paths(loaded, Path(path).parent)))
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
        return RunConfig.model_validate(tree)
    except ValidationError as e:
        where = source if not overrides else f"{source} (with overrides {' '.join(overrides)})"
        raise ConfigError(_format_error(e, where)) from None


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
