"""Load a user's domain/verifier file from outside the package (its decorators register it).

The loader lives in posttrain/config.py (load_config imports a config's `plugins:` before it
checks the registry names the config uses); this module keeps the name tasks code imports.
"""

from __future__ import annotations

from posttrain.config import load_plugin

__all__ = ["load_plugin"]
