"""Recipe presets: YAML files in `presets/`, each only what a recipe sets over the RunConfig defaults.

    base = load_preset("quickstart")            # a fresh dict each call
    cfg = load_config(user_yaml, overrides, base=base)   # preset <- YAML <- overrides, deep-merged
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrain.config import read_yaml_tree
from posttrain.errors import ConfigError

PRESETS = Path(__file__).parent / "presets"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def load_preset(name: str) -> dict[str, Any]:
    path = PRESETS / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown recipe preset {name!r}; known: {', '.join(preset_names())}")
    return read_yaml_tree(path)
