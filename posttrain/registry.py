"""Explicit named registries: every extension point is a Protocol plus one of these.

    @verifier("exact_numeric")
    class ExactNumeric: ...

    build(Spec("exact_numeric", {"tolerance": 1e-6}), kind="verifier")

Registration is explicit (a decorator at definition time); nothing is discovered by
`__subclasses__` or signature sniffing. Built-in implementations register when their
module is imported; `_BUILTIN_MODULES` names those modules so that a lookup of an
unknown name can import them lazily before giving up.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Generic, TypeVar

from posttrain.errors import ConfigError
from posttrain.types import Spec, thaw

T = TypeVar("T")

# kind -> modules whose import registers the built-in implementations of that kind.
_BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "verifier": ("posttrain.verifiers", "posttrain.longctx.reward"),
    "domain": ("posttrain.tasks",),
    "engine": ("posttrain.rollout",),
    "loss": ("posttrain.train.losses",),
    "dpo_loss": ("posttrain.train.losses",),
    "advantage": ("posttrain.train.advantages",),
    "kl": ("posttrain.train.losses",),
    "offpolicy": ("posttrain.train.offpolicy",),
    "sched_policy": ("posttrain.schedule",),
    "tool": ("posttrain.rollout.agent.tools",),
    "speculator": ("posttrain.rollout.fast.speculative",),
    "longctx_reader": ("posttrain.longctx.reader",),
    "detector": ("posttrain.eval.detectors",),
    "tracker": ("posttrain.store.trackers",),
    "sharded_trainer": ("posttrain.train.sharded.loops",),  # sft/dpo phases at world size N (rank 0)
    "rl_loop": ("posttrain.train.async_rl.loop",),  # rl.max_staleness > 0; looked up by name: async_rl imports rl
    "launcher": ("posttrain.train.sharded.launch", "posttrain.distributed.trainer_group"),  # trainer.launcher=ray: ranks 1..N-1 on the cluster
}


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def _load_builtins(self) -> None:
        for mod in _BUILTIN_MODULES.get(self.kind, ()):
            importlib.import_module(mod)

    def get(self, name: str) -> T:
        if name not in self._items:
            self._load_builtins()
        if name not in self._items:
            known = ", ".join(sorted(self._items)) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r}; known: {known}")
        return self._items[name]

    def names(self) -> list[str]:
        self._load_builtins()
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items


_REGISTRIES: dict[str, Registry[Any]] = {}


def registry(kind: str) -> Registry[Any]:
    if kind not in _REGISTRIES:
        _REGISTRIES[kind] = Registry(kind)
    return _REGISTRIES[kind]


def verifier(name: str) -> Callable[[T], T]:
    return registry("verifier").register(name)


def domain(name: str) -> Callable[[T], T]:
    return registry("domain").register(name)


def engine(name: str) -> Callable[[T], T]:
    return registry("engine").register(name)


def loss(name: str) -> Callable[[T], T]:
    return registry("loss").register(name)


def advantage(name: str) -> Callable[[T], T]:
    return registry("advantage").register(name)


def kl_estimator(name: str) -> Callable[[T], T]:
    return registry("kl").register(name)


def sched_policy(name: str) -> Callable[[T], T]:
    return registry("sched_policy").register(name)


def tool(name: str) -> Callable[[T], T]:
    return registry("tool").register(name)


def build(spec: Spec | str, kind: str, **extra: Any) -> Any:
    """Instantiate `spec` from the `kind` registry: factory(**spec.args, **extra)."""
    if isinstance(spec, str):
        spec = Spec(spec)
    factory = registry(kind).get(spec.name)
    try:
        return factory(**thaw(spec.args), **extra)
    except TypeError as e:
        raise ConfigError(f"bad arguments for {kind} {spec.name!r}: {e}") from None
