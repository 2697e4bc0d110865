"""Explicit named registries: every extension point is a Protocol plus one of these.

    @verifier("exact_numeric")
    class ExactNumeric: ...

    build(Spec("exact_numeric", {"tolerance": 1e-6}), kind="verifier")

Registration is explicit (a decorator at definition time); nothing is discovered by
`__subclasses__` or signature sniffing. Built-in implementations register when their
module is imported; `_BUILTIN_MODULES` names those modules so that a lookup of an
unknown name can import them lazily before giving up.

A registered factory's signature is the one truth about which keyword arguments it takes:
`check_kwargs` names an unknown key (from a config's `args`) before anything is built, and
`takes` lets a caller pass an optional keyword only to the factories that have it.
"""

from __future__ import annotations

import importlib
import inspect
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
    "speculator": ("posttrain.rollout.engines.fast.speculative",),
    "longctx_reader": ("posttrain.longctx.reader",),
    "detector": ("posttrain.eval.detectors",),
    "tracker": ("posttrain.store.trackers",),
    "sharded_trainer": ("posttrain.train.sharded.loops",),  # sft/dpo phases at world size N (rank 0)
    "recipe": tuple(f"posttrain.recipes.{m}" for m in ("quickstart", "vision", "agent", "sft", "dpo")),  # pipeline.py
    "agent_proxy": ("posttrain.serve.proxy_host",),  # rollout/agent/external.py; serve sits above rollout
    "rl_loop": ("posttrain.train.async_rl.loop",),  # rl.max_staleness > 0; looked up by name: async_rl imports rl
    "overlong": ("posttrain.verifiers.overlong",),  # rl.overlong: truncated completions gated, scored or penalised
    "launcher": ("posttrain.parallel.launch", "posttrain.distributed.trainer_group"),  # trainer.launcher=ray: ranks 1..N-1 on the cluster
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


def _keywords(factory: Any) -> tuple[list[str], bool] | None:
    """(the keyword names `factory` takes, whether it takes **kwargs); None without a signature."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check by name
        return None
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def check_kwargs(factory: Any, args: dict[str, Any], key: str, what: str, reserved: tuple[str, ...] = ()) -> None:
    """Every key of `args` is a keyword `factory` accepts; `reserved` ones the caller passes itself.
    A one-line ConfigError names the first bad key as `key.name`, with what `factory` takes."""
    sig = _keywords(factory)
    if sig is None:
        return
    named, takes_any = [n for n in sig[0] if n not in reserved], sig[1]
    for k in args:
        if k in reserved:
            raise ConfigError(f"{key}.{k}: {what} gets {k!r} from the run itself; remove it from {key}")
        if k not in named and not takes_any:
            raise ConfigError(f"{key}.{k}: {what} takes no argument {k!r}; it takes: {', '.join(named) or 'none'}")


def takes(factory: Any, name: str) -> bool:
    """Whether `factory` accepts the keyword `name` (a factory without a signature: assumed so)."""
    sig = _keywords(factory)
    return sig is None or name in sig[0] or sig[1]


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
