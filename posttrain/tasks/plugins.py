"""Load a user's domain/verifier file from outside the package (its decorators register it)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from posttrain.errors import ConfigError


def load_plugin(path: str | Path) -> ModuleType:
    """Import the Python file at `path` once (by resolved path) and return the module."""
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
