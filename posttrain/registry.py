"""Explicit named registries: every extension point is a Protocol plus one of these.

    @verifier("exact_numeric", answer_format="line")
    class ExactNumeric: ...

    build(Spec("exact_numeric", {"tolerance": 1e-6}), kind="verifier")

Registration is explicit (a decorator at definition time); nothing is discovered by
`__subclasses__` or signature sniffing, and nothing is imported here: the built-ins register
when their modules are imported, all of them by one explicit call,
`posttrain.builtins.load_builtins()` (the CLI makes it at start). Facts about an algorithm are declared where it is
registered, not in tables keyed by its name elsewhere:

    @loss("dapo", units="tokens", normalisable=True)          # sharded rank weights; takes rl.loss_norm
    @advantage("rloo", min_group=2, scope="group")            # config check; group vs batch statistics
    @verifier("python_tests", answer_format="code")           # the format rule (verifiers/rules.py)

A kind with declared properties (`PROPERTIES`) refuses, at registration time, an entry that
leaves one out or gives a value outside its choices; `registry(kind).props(name)` reads them. 

A registered factory's signature is the one truth about which keyword arguments it takes:
`check_kwargs` names an unknown key (from a config's `args`) before anything is built. What a
caller may pass beyond the config's `args` is a declared property, never sniffed.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Generic, TypeVar

from posttrain.errors import ConfigError
from posttrain.types import Spec, thaw

T = TypeVar("T")

# kind -> {property: its allowed values (a tuple) or its type}: every entry of the kind declares each.
PROPERTIES: dict[str, dict[str, tuple[Any, ...] | type]] = {
    # units: what a loss averages over, a token mean or a sequence mean; normalisable: it takes `denom`
    # (rl.loss_norm, train/loss_norm.py), the divisor that replaces the batch's token count
    "loss": {"units": ("tokens", "sequences"), "normalisable": bool},
    "advantage": {"min_group": int, "scope": ("group", "batch")},  # scored samples a group needs; stats over
    # the answer's shape for the format rule; "inner": a composite, its inner verifiers decide
    "verifier": {"answer_format": ("line", "code", "text", "long", "inner")},
    # inflight_weights: takes new weights between decode steps (rl.partial_rollouts); max_batch_arg: takes
    # `max_batch`, its generation concurrency; model_check: config.json dict -> why it cannot run it, or None
    "engine": {"inflight_weights": bool, "max_batch_arg": bool, "model_check": object},
    # second_models: the roles under `models:` its episodes talk to (τ²: ("user",), the simulated customer);
    # config_check refuses a run that names the domain but not the model; model_args: its args whose value,
    # when set, names a role under `models:` (τ²: ("judge",)), refused at load when that role is not set
    "domain": {"second_models": tuple, "model_args": tuple},
    # settings: the recipe's own keys, a pydantic section under `recipe.<name>:` in a run config (None: it has
    # none); config.py validates them at load (check_recipe_settings) and the recipe reads them (recipe_settings)
    "recipe": {"settings": object},
}
# kind -> {property: the value an entry that leaves it out declares}: properties added after plugins
# existed. normalisable=False: a loss that does not take `denom` refuses a non-default rl.loss_norm.
PROPERTY_DEFAULTS: dict[str, dict[str, Any]] = {"loss": {"normalisable": False}, "domain": {"second_models": (), "model_args": ()},
                                                "recipe": {"settings": None}}


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._props: dict[str, dict[str, Any]] = {}

    def register(self, name: str, **props: Any) -> Callable[[T], T]:
        props = {**PROPERTY_DEFAULTS.get(self.kind, {}), **props}
        self._check_props(name, props)  # at registration time: before the decorated object exists

        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name], self._props[name] = obj, dict(props)
            return obj

        return deco

    def _check_props(self, name: str, props: dict[str, Any]) -> None:
        declared = PROPERTIES.get(self.kind, {})
        for key, allowed in declared.items():
            if key not in props:
                raise ValueError(f"{self.kind} {name!r} must declare {key}= when it registers "
                                 f"({_describe(allowed)})")
            value = props[key]
            ok = value in allowed if isinstance(allowed, tuple) else isinstance(value, allowed)
            if not ok:
                raise ValueError(f"{self.kind} {name!r}: {key}={value!r} is not {_describe(allowed)}")
        for key in props:
            if key not in declared:
                raise ValueError(f"{self.kind} {name!r}: unknown property {key}=; "
                                 f"a {self.kind} declares: {', '.join(declared) or 'nothing'}")

    def props(self, name: str) -> dict[str, Any]:
        """The properties `name` declared when it registered (looked up as `get` does)."""
        self.get(name)
        return dict(self._props[name])

    def get(self, name: str) -> T:
        if name not in self._items:
            import difflib

            close = difflib.get_close_matches(str(name), list(self._items), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(sorted(self._items)) or "none (posttrain.builtins.load_builtins() loads the built-ins)"
            raise ConfigError(f"unknown {self.kind} {name!r}{hint}; known: {known}")
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items


_REGISTRIES: dict[str, Registry[Any]] = {}


def _describe(allowed: tuple[Any, ...] | type) -> str:
    return f"one of {', '.join(map(repr, allowed))}" if isinstance(allowed, tuple) else f"a {allowed.__name__}"


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


def registry(kind: str) -> Registry[Any]:
    if kind not in _REGISTRIES:
        _REGISTRIES[kind] = Registry(kind)
    return _REGISTRIES[kind]


def verifier(name: str, *, answer_format: str) -> Callable[[T], T]:
    return registry("verifier").register(name, answer_format=answer_format)


def domain(name: str, **props: Any) -> Callable[[T], T]:
    return registry("domain").register(name, **props)


def engine(name: str, *, inflight_weights: bool, max_batch_arg: bool,
           model_check: Callable[[dict], str | None] | None) -> Callable[[T], T]:
    return registry("engine").register(name, inflight_weights=inflight_weights, max_batch_arg=max_batch_arg,
                                       model_check=model_check)


def loss(name: str, *, units: str,
         normalisable: bool = PROPERTY_DEFAULTS["loss"]["normalisable"]) -> Callable[[T], T]:
    """`normalisable=True`: the loss takes `denom=` (rl.loss_norm); the default, False, makes
    config_check refuse a non-default rl.loss_norm with it rather than silently ignore it."""
    return registry("loss").register(name, units=units, normalisable=normalisable)


def advantage(name: str, *, min_group: int, scope: str) -> Callable[[T], T]:
    return registry("advantage").register(name, min_group=min_group, scope=scope)


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
