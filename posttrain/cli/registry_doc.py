"""Generate docs/extending.md: every extension point, read from the registries themselves.

    python -m posttrain.cli.registry_doc            # print the page
    python -m posttrain.cli.registry_doc --write    # write docs/extending.md

After `load_builtins()` the page lists each registry kind with its contract (the Protocol, or
base class, whose members an implementation must provide), the properties every entry of the
kind declares (`registry.PROPERTIES`), and every registered name with the first line of its
docstring and its declared property values. tests/unit/core/test_extending_doc.py regenerates
the page and compares it with the committed one, so a new kind, entry or member cannot leave
the page stale. The "add a ..." checklists at the top are written here, by hand.

A kind absent from `CONTRACTS` stops the generator: the contract of a new extension point has
to be named here before the page can be written.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
from pathlib import Path
from typing import Any

from posttrain.builtins import BUILTIN_MODULES, load_builtins
from posttrain.registry import PROPERTIES, registry
from posttrain.tasks.tool_base import Tool

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"

# kind -> the contract its entries implement, "module:Name": a Protocol (a base class for the
# speculators, a dataclass for tools), several for a kind whose optional capabilities are
# Protocols of their own.
CONTRACTS: dict[str, tuple[str, ...]] = {
    "verifier": ("posttrain.verifiers.base:Verifier", "posttrain.verifiers.base:BatchVerifier"),
    "domain": ("posttrain.tasks.base:Domain",),
    "domain_check": ("posttrain.tasks.base:DomainCheck",),
    "domain_family": ("posttrain.tasks.base:DomainFamily",),
    "engine": ("posttrain.rollout.engine:Engine", "posttrain.rollout.engine:EngineInfo",
               "posttrain.rollout.engine:DescribesModel", "posttrain.rollout.engine:WeightReceiver",
               "posttrain.rollout.engine:InflightWeights", "posttrain.rollout.engine:ClusterMetrics",
               "posttrain.rollout.engine:StreamingEngine"),
    "loss": ("posttrain.train.losses:Loss",),
    "dpo_loss": ("posttrain.train.losses:PreferenceLoss",),
    "advantage": ("posttrain.train.advantages:AdvantageEstimator",),
    "kl": ("posttrain.train.losses:KLEstimator",),
    "offpolicy": ("posttrain.train.offpolicy:OffPolicyCorrection",),
    "sched_policy": ("posttrain.schedule.policies:SchedulePolicy",),
    "tool": ("posttrain.tasks.tool_base:Tool",),
    "speculator": ("posttrain.rollout.engines.fast.speculative:Speculator",),
    "longctx_reader": ("posttrain.longctx.reader:Reader",),
    "detector": ("posttrain.eval.detectors.base:Detector",),
    "tracker": ("posttrain.store.trackers.base:Tracker",),
    "model_backend": ("posttrain.models.service:ChatBackend",),
    "overlong": ("posttrain.verifiers.overlong:OverlongPolicy",),
    "recipe": ("posttrain.recipes.pipeline:Recipe",),
}

CHECKLISTS = """\
## Checklists

Every extension point is a contract (below) plus a registry entry. A plugin outside the tree
registers the same way and is loaded with `--plugin FILE` or a config's `plugins:` list
(docs/config.md). After adding a built-in, run `python -m posttrain.cli.registry_doc --write`
and commit docs/extending.md with it (tests/unit/core/test_extending_doc.py fails until then).

**Add a loss** (an RL policy loss)
1. Write `fn(logp, old_logp, adv, mask, **args) -> (scalar, stats)` in posttrain/train/losses.py
   (shapes `[B, T]`, `adv` `[B]`), with a docstring whose first line says what it is.
2. Register it with `@loss("name", units=..., normalisable=...)`: `units` is what it averages
   over (tokens or sequences; the sharded trainer weights ranks by it), `normalisable=True` if
   it takes `denom=` (rl.loss_norm).
3. Test it in tests/unit/train/ on a batch where it should differ from an existing loss.

**Add a domain** (a task generator)
1. A class with the `Domain` members (posttrain/tasks/base.py): `name`, `generate`,
   `wrong_answer`, in its own module under posttrain/tasks/; each task carries its oracle
   answer and names a registered verifier.
2. Register it with `@domain("name")` and import the module from posttrain/tasks/__init__.py.
3. Tests: tests/unit/tasks/ (the oracle scores 1, the wrong answer 0) and the hack probes of
   tests/unit/verifiers/soundness/ (every probe scores 0 on its tasks).
4. Load-time checks of its arguments, if any: a `domain_check` entry (posttrain/tasks/reasoning_gym.py).

**Add an engine** (a generation backend)
1. A class that implements `Engine` (generate, load_weights, weights_version) and, publicly,
   each optional capability it has (`EngineInfo`, `WeightReceiver`, `InflightWeights`,
   `StreamingEngine`, ...): callers test `isinstance(engine, X)`, never `getattr`.
2. Register it with `@engine("name", inflight_weights=..., max_batch_arg=..., model_check=...)`
   in posttrain/rollout/engines/ and add its module to the list posttrain/rollout/__init__.py imports.
3. Tests in tests/unit/rollout/, for example that it generates what `hf` generates for the same
   greedy request.

**Add a tool** (for agent episodes)
1. A function `fn(state, **arguments) -> str` in posttrain/tasks/tools_impl.py (or a module of
   its own), registered as a declared `Tool` with `@tool_fn("name", description, parameters)`
   (posttrain/tasks/tool_base.py); `needs_session=True` if it runs in the sandbox session.
2. A wrong call raises `ToolError` (shown to the model as the observation).
3. Test it in tests/unit/agent/ with a hostile argument as well as a right one.
"""


def _contract(ref: str) -> type:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)  # a name written in CONTRACTS above


def _first_line(doc: str | None) -> str:
    """The docstring's first paragraph on one line (its first sentence may wrap), at most 200 chars."""
    text = inspect.cleandoc(doc or "")
    para = " ".join(text.split("\n\n")[0].split()) if text else ""
    return (para if len(para) <= 200 else para[:197] + "...") or "(no docstring)"


def _signature(fn: Any, drop_self: bool) -> str:
    """`(a: int, b=2) -> str`, annotations exactly as written in the source."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())[1 if drop_self else 0:]
    parts = []
    for p in params:
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    ret = f" -> {_annotation(sig.return_annotation)}" if sig.return_annotation is not sig.empty else ""
    return f"({', '.join(parts)}){ret}"


def _annotation(a: Any) -> str:
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _members(cls: type) -> list[str]:
    """One line per member `cls` itself declares: attributes, then methods with signatures."""
    own = cls.__dict__
    lines = [f"- `{n}: {_annotation(t)}`" for n, t in own.get("__annotations__", {}).items() if not n.startswith("_")]
    if dataclasses.is_dataclass(cls):
        lines = [f"- `{f.name}: {_annotation(f.type)}`" for f in dataclasses.fields(cls)]
    for name, member in own.items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(member, property):
            lines.append(f"- `{name}` (property): {_first_line(member.__doc__)}")
        elif inspect.isfunction(member):
            doc = f": {_first_line(member.__doc__)}" if member.__doc__ else ""
            lines.append(f"- `{name}{_signature(member, drop_self=True)}`{doc}")
    return lines


def _entry_doc(obj: Any) -> str:
    if isinstance(obj, Tool):  # a declared Tool carries its description; its class doc is the type's
        return _first_line(obj.description)
    own = obj if inspect.isclass(obj) or inspect.isroutine(obj) else type(obj)
    if own.__doc__:  # its own docstring, never one inherited from a base class
        return _first_line(own.__doc__)
    module = inspect.getmodule(own)  # else its module's: one module per built-in, mostly
    return f"(module {module.__name__}) {_first_line(module.__doc__)}" if module and module.__doc__ else _first_line(None)


def _props_text(value: Any) -> str:
    """A function or class by its name (a recipe's settings section: `AgentRecipeSettings`), else repr."""
    return value.__name__ if inspect.isroutine(value) or inspect.isclass(value) else repr(value)


def _entries(kind: str) -> list[str]:
    """The table rows, one per name; a family of more than 6 names with the same docstring and
    properties (the 102 `rg-*` domains) shares one row that still lists every name."""
    reg, rows = registry(kind), {}
    for name in reg.names():
        props = ", ".join(f"{k}={_props_text(v)}" for k, v in sorted(reg.props(name).items()))
        rows.setdefault((_entry_doc(reg.get(name)).replace("|", "\\|"), props), []).append(name)
    lines = []
    for (doc, props), names in rows.items():
        groups = [names] if len(names) > 6 and not doc.startswith("(") else [[n] for n in names]
        for group in groups:
            shown = f"`{group[0]}`" if len(group) == 1 else \
                f"`{group[0]}` ... `{group[-1]}` ({len(group)} names: {', '.join(group)})"
            lines.append((group[0], f"| {shown} | {doc} | {props or '-'} |"))
    return ["| name | docstring (first paragraph) | declared properties |", "|---|---|---|",
            *(line for _, line in sorted(lines))]


def _kind_section(kind: str) -> list[str]:
    if not CONTRACTS.get(kind):
        raise SystemExit(f"registry kind {kind!r} has no contract in posttrain/cli/registry_doc.py CONTRACTS; "
                         "name its Protocol there")
    reg = registry(kind)
    out = [f"### `{kind}`", "", f"Registered by importing: {', '.join(f'`{m}`' for m in BUILTIN_MODULES.get(kind, ()))}.", ""]
    for ref in CONTRACTS[kind]:
        cls = _contract(ref)
        module = ref.split(":")[0].replace(".", "/") + ".py"
        doc = f": {_first_line(cls.__doc__)}" if cls.__doc__ else ""
        out += [f"Contract `{cls.__name__}` ({module}){doc}", "", *_members(cls), ""]
    declared = PROPERTIES.get(kind, {})
    if kind == "recipe":  # its one property is a class, or None (posttrain/config_recipe.py)
        out += ["Every entry declares: `settings`: the pydantic section of the keys it alone reads, `recipe.<name>:` "
                "in a run config (posttrain/config_recipe.py), or None.", ""]
    elif declared:
        shown = "; ".join(f"`{k}`: {', '.join(map(repr, v)) if isinstance(v, tuple) else v.__name__}"
                          for k, v in declared.items())
        out += [f"Every entry declares: {shown}.", ""]
    return out + [f"{len(reg.names())} registered:", "", *_entries(kind), ""]


def render() -> str:
    """The whole page, from the registries as `load_builtins()` leaves them."""
    load_builtins()
    kinds = list(BUILTIN_MODULES)
    head = ["# Extending posttrain: every extension point", "",
            "<!-- generated by `python -m posttrain.cli.registry_doc --write`; do not edit by hand -->", "",
            f"{len(kinds)} registry kinds. Each is a contract (a Protocol; the speculators' is a base class,",
            "a tool is a declared dataclass) plus a named registry; `@name(...)` decorators register entries and",
            "declare their properties where they are defined (posttrain/registry.py).", "", CHECKLISTS,
            "## Reference", ""]
    body = [line for kind in kinds for line in _kind_section(kind)]
    return "\n".join(head + body).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(PAGE.parents[1])}")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        PAGE.write_text(text)
        print(f"wrote {PAGE}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
