"""Named components in a run config: one shape, `{name: <registry name>, args: {...}}`.

    loss: Annotated[Component, *named("loss", "dapo")]             # rl.loss: dapo | {name: gspo, args: {...}}
    engine: Annotated[EngineConfig, Registered("engine")] = ...    # a Component subclass with more keys

`Registered` marks a field whose value (a name, a list of names, or a Component's `name`) is an
entry of a registry; posttrain/config.py walks the marked fields (`registered_fields`) after
validation and checks each name, and a Component's `args` against the entry's signature. The
keys written before this shape existed (`rl.loss_args`, `schedule.policy`) move here
(`move_legacy_component_keys`). config_schema.py uses these to declare its sections.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Registered:
    """Schema metadata on a field: its value (a name, a list of names, or a Component's `name`) is
    an entry of registry `kind`, and a Component's `args` are keywords that entry takes (`reserved`:
    ones the caller passes itself). config.py checks both at load time (check_registered)."""

    __slots__ = ("kind", "reserved", "check_args")

    def __init__(self, kind: str, reserved: tuple[str, ...] = (), check_args: bool = True) -> None:
        self.kind, self.reserved, self.check_args = kind, reserved, check_args


class Component(Section):
    """A named component, one shape everywhere: `{name: <registry name>, args: {...}}`. A bare string
    is shorthand: `rl.loss: dapo` is `rl.loss: {name: dapo, args: {}}`."""

    name: str
    args: dict[str, Any] = {}

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data


ENGINE_RESERVED = ("model", "tokenizer")  # what make_engine passes an engine itself: engine.args may not set them


def named(kind: str, default: str, reserved: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """Annotated metadata of a plain Component field of registry `kind`: default `{name: default}`;
    a mapping without `name` (`rl.loss: {args: {...}}`) keeps the default name."""
    def fill(v: Any) -> Any:
        return {"name": default, **v} if isinstance(v, dict) and "name" not in v else v
    return Field(default_factory=lambda: Component(name=default)), BeforeValidator(fill), Registered(kind, reserved)


def registered_fields(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, Registered, Any]]:
    """(dotted key, its Registered metadata, its value) for every field of `model`, and of the sections
    under it (in mappings and lists too), whose value names a registry entry."""
    for fname, info in type(model).model_fields.items():
        value, key = getattr(model, fname), f"{prefix}{fname}"
        reg = next((m for m in info.metadata if isinstance(m, Registered)), None)
        if reg is not None:
            yield key, reg, value
        subs = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
        if isinstance(value, BaseModel):
            yield from registered_fields(value, f"{key}.")
        for k, sub in subs or ():
            if isinstance(sub, BaseModel):
                yield from registered_fields(sub, f"{key}.{k}.")


@functools.cache
def component_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], ...]:
    """The paths of every Component field under `model` (("rl", "loss"), ("engine",), ...), found from
    the field types: where config.py merges layers, a layer naming another component replaces it whole."""
    out: list[tuple[str, ...]] = []
    for fname, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, Component):
            out.append((*prefix, fname))
        elif isinstance(ann, type) and issubclass(ann, Section):
            out.extend(component_paths(ann, (*prefix, fname)))
    return tuple(out)


# The keys of a named component before `{name, args}` was its one shape: section -> {old key: (new key, its
# sub-key or None)}. `rl.loss_args` -> `rl.loss.args`, `schedule.policy` -> `schedule.name`.
LEGACY_COMPONENT_KEYS: dict[str, dict[str, tuple[str, str | None]]] = {
    "rl": {"loss_args": ("loss", "args")},
    "schedule": {"policy": ("name", None)},
}


def move_legacy_component_keys(section: str, data: Any) -> Any:
    """One section's raw mapping with LEGACY_COMPONENT_KEYS moved to their `{name, args}` place; a key
    given both ways with different values is an error naming both."""
    if not isinstance(data, dict) or not any(k in data for k in LEGACY_COMPONENT_KEYS[section]):
        return data
    data = dict(data)
    for old, (new, sub) in LEGACY_COMPONENT_KEYS[section].items():
        if old not in data:
            continue
        value = data.pop(old)
        if sub is None:
            current, new_key = data.get(new, value), f"{section}.{new}"
            data[new] = value
        else:
            comp = data.get(new)
            comp = {"name": comp} if isinstance(comp, str) else dict(comp or {})
            current, new_key = comp.get(sub, value), f"{section}.{new}.{sub}"
            data[new] = {**comp, sub: value}
        if current != value:
            raise ValueError(f"{section}.{old}={value!r} and {new_key}={current!r} disagree; set {new_key} only")
    return data
