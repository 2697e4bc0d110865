"""Checks of a loaded `RunConfig` that need more than its schema: domain names, plugin files,
task files, how components combine, the model directory and the engine against the model.

    cfg = load_config(path, overrides)
    check_config(cfg, needs=("rl",))       # raises ConfigError, one line, before any model work

`load_config` already rejects unknown keys, wrong types, out-of-range numbers, enumerated
values outside their Literal, and registry names that are not registered (every field marked
`Registered` in config_schema: losses, advantages, engines, trackers, ...); this module answers
"do the domains and task files exist, do the components fit together, and can this engine run
this model?" It imports the registries' modules (torch among them) but builds nothing, so it
costs about a second, not a training phase.

Keyword arguments of `tasks.domains.X.args` are checked by name against the generator's
signature (`registry.check_kwargs`; a component's `args`, such as `engine.args`, at load), so
a typo fails here and not after the run directory is written.
Does not check: their values (the component checks them when built), ids that a domain's
generated tasks share with a task file (`make_splits` does), or a model's weights (only
its config.json and tokenizer files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from posttrain.config import RunConfig
from posttrain.errors import ConfigError
from posttrain.registry import check_kwargs, registry
from posttrain.types import Task

from posttrain.config_schema import ENGINE_RESERVED  # noqa: F401  re-exported: rollout/__init__.py reads it here


def load_plugins(paths: Iterable[str | Path]) -> None:
    """Import each plugin file once; its decorators register its domains, verifiers, losses."""
    from posttrain.tasks.plugins import load_plugin

    for p in paths:
        load_plugin(p)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest known name, or ''."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _known(kind: str, name: str, key: str) -> None:
    reg = registry(kind)
    try:
        reg.get(name)
    except ConfigError:
        raise ConfigError(f"{key}={name!r} is not a registered {kind}{did_you_mean(name, reg.names())}; "
                          f"known: {', '.join(reg.names()) or 'none'}") from None


def _check_rl(cfg: RunConfig) -> None:
    rl = cfg.rl  # every registry name was checked by load_config (config.check_registered)
    min_group = registry("advantage").props(rl.advantage.name)["min_group"]  # declared where it registers
    if rl.group_size < min_group:
        raise ConfigError(f"rl.group_size={rl.group_size}: the {rl.advantage.name!r} advantage compares samples of one "
                          f"prompt, so it needs rl.group_size >= {min_group}")
    if rl.clip_eps_high is not None and rl.clip_eps is not None and rl.clip_eps_high < rl.clip_eps:
        raise ConfigError(f"rl.clip_eps_high={rl.clip_eps_high} is below rl.clip_eps={rl.clip_eps}")
    _check_async(cfg)
    _check_objective(cfg)


# engine.args.matmul_dtype values that make the engine's logprobs low-precision ones
_LOW_PRECISION_MATMUL = ("bfloat16", "bf16", "float16", "fp16", "half")


def overlong_policy(cfg: RunConfig) -> Any:
    """`rl.overlong` built (verifiers/overlong.py, through its registry); a bad name or argument is a
    one-line ConfigError naming the key."""
    name, args = cfg.rl.overlong.name, dict(cfg.rl.overlong.args)
    _known("overlong", name, "rl.overlong.name")
    factory = registry("overlong").get(name)
    check_kwargs(factory, args, "rl.overlong.args", f"overlong policy {name!r}", reserved=("budget",))
    try:
        return factory(**args, budget=cfg.rl.max_new_tokens)
    except TypeError as e:
        raise ConfigError(f"rl.overlong.args: overlong policy {name!r}: {e}") from None


def check_rl_splits(cfg: RunConfig, splits: Any) -> None:
    """What only the built splits show: an overlong policy a task cannot take (a task field naming
    an unknown choice, a multi-step episode, a soft penalty as long as the task's budget) and a
    fixed order naming a task outside the RL split. One-line ConfigErrors."""
    policy, name = overlong_policy(cfg), cfg.rl.overlong.name
    for t in [*splits.train, *splits.held_out]:
        named = t.metadata.get("overlong")
        if named is not None and named not in ("gate", "score"):
            raise ConfigError(f"task {t.id!r}: metadata.overlong={named!r}; a task may name gate or score")
        reason = policy.refusal(t)
        if reason is not None:
            raise ConfigError(f"rl.overlong.name={name!r}: {reason}; use rl.overlong.name=gate")
    if "order_file" in cfg.schedule.args:
        from posttrain.schedule.fixed_order import check_order, load_order

        check_order(load_order(cfg.schedule.args["order_file"]), (t.id for t in splits.rl), cfg.rl.prompts_per_step,
                    cfg.rl.steps)


def _check_objective(cfg: RunConfig) -> None:
    """rl.overlong, rl.loss_norm, schedule.name=fixed_order and the rollout precision (issue 38)."""
    rl = cfg.rl
    overlong_policy(cfg)  # name, arguments, cache below the budget
    # declared where the loss registers (@loss(..., normalisable=True): it takes `denom`), never sniffed
    if rl.loss_norm != "kept_tokens" and not registry("loss").props(rl.loss.name)["normalisable"]:
        raise ConfigError(f"rl.loss_norm={rl.loss_norm}: rl.loss={rl.loss.name!r} is not a token-level mean (it takes no "
                          "denominator); use rl.loss=dapo or cispo, or rl.loss_norm=kept_tokens")
    _check_rollout_precision(cfg)
    order_file = cfg.schedule.args.get("order_file")
    if (cfg.schedule.name == "fixed_order") != (order_file is not None):
        raise ConfigError(f"schedule.name={cfg.schedule.name!r} with schedule.args.order_file={order_file!r}: "
                          "the fixed_order policy and an order file go together")
    if order_file is not None or rl.overlong.name != "gate" or _task_overrides(cfg):
        from posttrain.tasks.splits import make_splits

        check_rl_splits(cfg, make_splits(cfg))  # the recipe checks its final splits again (long prompts left out)


def _check_rollout_precision(cfg: RunConfig) -> None:
    """bf16 rollouts (engine.args.matmul_dtype: bfloat16, or auto, which may pick it) need the
    trainer's recompute of the behaviour logprobs (rl.old_logprobs: recompute), which the
    synchronous single-process update does: asynchronous and sharded updates read the engine's."""
    rl, dtype = cfg.rl, str(cfg.engine.args.get("matmul_dtype") or "")
    if (dtype in _LOW_PRECISION_MATMUL or dtype == "auto") and rl.old_logprobs != "recompute":
        raise ConfigError(f"engine.args.matmul_dtype={dtype} with rl.old_logprobs={rl.old_logprobs}: low-precision "
                          "rollout logprobs cannot be the behaviour policy's; set rl.old_logprobs=recompute (the "
                          "trainer recomputes them) or engine.args.matmul_dtype=float32")
    if rl.rollout_correction and rl.old_logprobs != "recompute":
        raise ConfigError(f"rl.rollout_correction=true with rl.old_logprobs={rl.old_logprobs}: the correction weighs the "
                          "trainer's recomputed logprobs against the engine's; set rl.old_logprobs=recompute")
    if rl.old_logprobs == "recompute" and (rl.max_staleness > 0 or cfg.trainer.world_size > 1):
        raise ConfigError(f"rl.old_logprobs=recompute needs the synchronous single-process update (rl.max_staleness="
                          f"{rl.max_staleness}, trainer.world_size={cfg.trainer.world_size}): the recompute is the "
                          "current weights' logprobs; set rl.old_logprobs=engine with float32 rollouts")


def _task_overrides(cfg: RunConfig) -> bool:
    """Whether a task file names its own overlong choice (metadata.overlong)."""
    return any("overlong" in t.metadata for f in [*cfg.tasks.files, *cfg.tasks.heldout_files] for t in check_task_file(f))


def _check_async(cfg: RunConfig) -> None:
    """rl.max_staleness / rl.offpolicy / rl.partial_rollouts (train/async_rl/)."""
    rl = cfg.rl  # rl.max_staleness >= 0 and rl.offpolicy.name are the schema's (config_schema, check_registered)
    if rl.max_staleness >= 1 and cfg.cluster.address is not None and cfg.cluster.staleness > 0:
        # a lagging worker would serve versions older than the batch's pin, past the K the loop enforces
        raise ConfigError(f"rl.max_staleness={rl.max_staleness} with cluster.staleness={cfg.cluster.staleness}: the "
                          "asynchronous loop bounds staleness itself and needs every worker on the version it pins; "
                          "set cluster.staleness=0")
    if rl.refill_rounds > 0 and rl.max_staleness > 0:
        raise ConfigError(f"rl.refill_rounds={rl.refill_rounds} with rl.max_staleness={rl.max_staleness}: the "
                          "asynchronous source does not refill batches yet; set one of them to 0")
    if rl.longtail.enabled and (rl.max_staleness > 0 or rl.refill_rounds > 0):
        raise ConfigError("rl.longtail.enabled=true is its own batch source: it does not combine with "
                          f"rl.max_staleness={rl.max_staleness} or rl.refill_rounds={rl.refill_rounds}; set those to 0")
    if rl.partial_rollouts and rl.max_staleness < 1:
        raise ConfigError("rl.partial_rollouts=true needs rl.max_staleness >= 1: with K = 0 no weights arrive while "
                          "a batch generates; set rl.max_staleness=1 or rl.partial_rollouts=false")
    if rl.partial_rollouts:
        if not registry("engine").props(cfg.engine.name)["inflight_weights"]:  # declared where the engine registers
            raise ConfigError(f"rl.partial_rollouts=true: engine.name={cfg.engine.name!r} cannot take new weights in the middle "
                              "of a batch; set rl.partial_rollouts=false")


def unknown_domain_error(name: str, key: str) -> ConfigError:
    """The error for an unregistered domain: a family's own line (`domain_family`, by prefix:
    `rg-` says which generators exist) when one claims the name, else the list of known domains."""
    families = registry("domain_family")
    families.names()  # imports the built-in families
    for prefix in families.names():
        if name.startswith(prefix):
            line = families.get(prefix)(name)
            if line:
                return ConfigError(f"{key}: {line}")
    known = ", ".join(registry("domain").names())
    return ConfigError(f"{key}={name!r} is not a registered domain; known: {known} "
                       "(a domain of your own? pass --plugin FILE or list it under plugins:)")


def _check_tasks(cfg: RunConfig) -> None:
    for name, d in cfg.tasks.domains.items():
        key = f"tasks.domains.{name}"
        if name not in registry("domain").names():
            raise unknown_domain_error(name, key)
        if name in registry("domain_check"):  # a domain's own load-time check: package, args, difficulty range
            registry("domain_check").get(name)(name, d.args, [d.difficulty, *curriculum_levels(cfg, name)], key)
        check_kwargs(registry("domain").get(name), d.args, f"{key}.args", f"domain {name!r}")
        for role in registry("domain").props(name)["second_models"]:  # e.g. τ²'s simulated customer
            if role not in cfg.models:
                raise ConfigError(f"{key}: its episodes talk to a second model as {role!r}, and models.{role} is not set: "
                                  f"name one, e.g. models: {{{role}: {{path: models/smollm2}}}} (docs/second_model.md)")
        for arg in registry("domain").props(name)["model_args"]:  # e.g. τ²'s `judge: judge`
            role = d.args.get(arg)
            if role is not None and role not in cfg.models:
                raise ConfigError(f"{key}.args.{arg}={role!r} names a second model, and models.{role} is not set: "
                                  f"name one, e.g. models: {{{role}: {{path: models/smollm2}}}} (docs/second_model.md)")
    _check_curriculum(cfg)
    if not cfg.tasks.domains and not cfg.tasks.files:
        raise ConfigError("tasks: no domains and no task files; a run needs at least one of tasks.domains / tasks.files")
    from posttrain.tasks.splits import check_unique_ids

    # ids repeated across task files (two copies of one file, a held-out file sharing a training id); a file id
    # equal to a generated one is make_splits' to find
    files = [(str(f), check_task_file(f)) for f in cfg.tasks.files]
    held = [(f"held-out file {f}", check_task_file(f, "tasks.heldout_files")) for f in cfg.tasks.heldout_files]
    check_unique_ids([*files, *held])


def curriculum_levels(cfg: RunConfig, name: str) -> list[float]:
    """The difficulty levels the curriculum pools for domain `name` (none when it does not follow it)."""
    cur = cfg.schedule.curriculum
    if (cur is None or cfg.tasks.domains[name].held_out or name in cur.exclude
            or (cur.domains is not None and name not in cur.domains)):
        return []
    return list(cur.levels)


def _check_curriculum(cfg: RunConfig) -> None:
    cur = cfg.schedule.curriculum
    if cur is None:
        return
    from posttrain.schedule.curriculum import check_args

    check_args(cur.band, cur.window, cur.min_evidence, cur.cooldown, cur.start)
    if not cur.levels or cur.levels != sorted(set(cur.levels)):
        raise ConfigError(f"schedule.curriculum.levels={cur.levels}: need distinct levels in ascending order")
    trained = [n for n, d in cfg.tasks.domains.items() if not d.held_out]
    for key, names in (("domains", cur.domains or []), ("exclude", cur.exclude)):
        for n in names:
            if n not in trained:
                raise ConfigError(f"schedule.curriculum.{key} names {n!r}, which is not a trained domain of "
                                  f"tasks.domains; trained: {', '.join(trained)}")


def check_task_file(path: str | Path, key: str = "tasks.files") -> list[Task]:
    """A task file exists, parses, holds at least one task, and names only registered verifiers
    and tools; its tasks. The error names the config key (`key`) and shows the resolved path, so a
    relative one says where it looked."""
    from posttrain.tasks.io import load_tasks

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{key}: task file not found: {p.resolve()}")
    tasks = load_tasks(p)  # refuses an empty file, naming it
    check_task_names(tasks, str(p))
    return tasks


def check_task_names(tasks: Iterable[Task], where: str) -> None:
    """Every verifier and tool the tasks name is registered (a missing --plugin fails here, not as
    a run of infrastructure errors)."""
    verifiers, tools = registry("verifier").names(), registry("tool").names()
    for t in tasks:
        if t.verifier.name not in verifiers:
            raise ConfigError(f"{where}: task {t.id!r} uses verifier {t.verifier.name!r}, which is not registered"
                              f"{did_you_mean(t.verifier.name, verifiers)}; known: {', '.join(verifiers)} "
                              "(a plugin? pass --plugin FILE)")
        for tool in t.environment.tools:
            if tool not in tools:
                raise ConfigError(f"{where}: task {t.id!r} uses tool {tool!r}, which is not registered"
                                  f"{did_you_mean(tool, tools)}; known: {', '.join(tools)}")


def check_engine_available(name: str, model_dir: str | Path | None) -> None:
    """`eval --engine NAME`: the engine is registered and can run here (its package installed)
    and run this model, before the model is loaded. `auto` picks one that can."""
    if name == "auto":
        return
    _known("engine", name, "--engine")
    reason = _engine_reason(name, _model_json(Path(model_dir)) if model_dir else {})
    if reason:
        raise ConfigError(f"--engine {name}: {reason}")


def _model_json(d: Path) -> dict:
    try:
        return json.loads((d / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def _engine_reason(name: str, model_cfg: dict) -> str | None:
    """The engine's own pure check (package installed, architecture supported), or None."""
    check = registry("engine").props(name)["model_check"]  # the engine's own pure check, declared where it registers
    return check(model_cfg) if check is not None else None


def check_model(cfg: RunConfig) -> None:
    """engine.args are the engine's keywords; model.path is an HF directory the engine can run."""
    # engine.name and engine.args were checked by load_config (config.check_registered)
    if cfg.model.path is None:  # the tiny model: a llama the engine must still be able to run here
        reason = _engine_reason(cfg.engine.name, {"model_type": "llama", **cfg.model.tiny.model_dump()})
        if reason:
            raise ConfigError(f"engine.name={cfg.engine.name!r}: {reason}")
        return
    d = Path(cfg.model.path)
    if not d.exists():
        raise ConfigError(f"model directory not found: {d} (model.path); make one with `posttrain models get NAME --out DIR`")
    if not (d / "config.json").is_file():
        raise ConfigError(f"model.path={d}: not a model directory (no config.json); "
                          "make one with `posttrain models get NAME --out DIR`")
    try:
        model_cfg = json.loads((d / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{d / 'config.json'}: unreadable ({e})") from None
    reason = _engine_reason(cfg.engine.name, model_cfg)
    if reason:
        raise ConfigError(f"engine.name={cfg.engine.name!r} cannot run model.path={d}: {reason}")


def check_sharded(cfg: RunConfig) -> None:
    """trainer.world_size / tp: what the sharded trainer (posttrain/train/sharded) supports."""
    import os

    t = cfg.trainer  # trainer.launcher is a Literal of the schema: local | ray
    if t.launcher == "ray" and not cfg.cluster.address:
        raise ConfigError("trainer.launcher=ray needs cluster.address (the Ray head, e.g. HEAD:6379 or auto)")
    world = int(os.environ.get("WORLD_SIZE", t.world_size))
    if world == 1 and t.tp == 1:
        return
    if world % t.tp:
        raise ConfigError(f"trainer.tp={t.tp} must divide the world size {world}")
    unsupported = {"trainer.lora": t.lora is not None, "model.vision": cfg.model.vision is not None,
                   "rl.max_staleness >= 1 (its off-policy correction)": cfg.rl.max_staleness >= 1,
                   "rl.longtail.enabled (its staleness lr scale)": cfg.rl.longtail.enabled,
                   f"rl.loss_norm={cfg.rl.loss_norm}": cfg.rl.loss_norm != "kept_tokens",
                   "sft.eval_every": bool(cfg.sft.eval_every), "dpo.eval_every": bool(cfg.dpo.eval_every)}
    bad = [k for k, v in unsupported.items() if v]
    if bad:
        raise ConfigError(f"trainer.world_size={world}: {', '.join(bad)} is not supported by the sharded trainer yet; "
                          f"unset it or run with trainer.world_size=1")
    if t.tp > 1:  # the TP plan (parallel/plan.py) splits heads, kv heads and the MLP width
        dims = cfg.model.tiny.model_dump() if cfg.model.path is None else \
            json.loads((Path(cfg.model.path) / "config.json").read_text())
        for key in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
            if dims.get(key) is None or dims[key] % t.tp:
                raise ConfigError(f"trainer.tp={t.tp}: the model's {key}={dims.get(key)} does not divide by it")


def check_config(cfg: RunConfig, needs: Iterable[str] = ("tasks", "model", "rl")) -> None:
    """Every check a command needs before its first expensive step; raises ConfigError."""
    load_plugins(cfg.plugins)
    check_sharded(cfg)
    needs = set(needs)
    if "tasks" in needs:
        _check_tasks(cfg)
    if "model" in needs:
        check_model(cfg)
    if "rl" in needs:
        _check_rl(cfg)
        from posttrain.models.tokenizer_match import check_teacher_tokenizer

        check_teacher_tokenizer(cfg)  # rl.loss=distill: student and teacher share a tokenizer (train/distill.py)
