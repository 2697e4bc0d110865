"""The base policy of a run: `model.path` loaded, or the tiny default built once per run.

    model, tok = build_base(cfg, run_dir)

The tiny default is saved to `run_dir/base-model` and loaded back with `from_pretrained`,
so it takes the same path a real checkpoint takes; a resumed run reuses the saved one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_base(cfg: Any, run_dir: Path) -> tuple[Any, Any]:
    from posttrain.models import load_policy, save_policy
    from posttrain.models.tiny import build_tiny
    from posttrain.store.run import RunDir

    if cfg.model.path:
        return load_policy(cfg.model.path, cfg.model.dtype)
    base = RunDir(run_dir).base_model
    if not (base / "config.json").is_file():
        save_policy(*build_tiny(cfg.model.tiny, seed=cfg.seed), base)
    return load_policy(base)
