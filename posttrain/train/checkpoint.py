"""Checkpoints that resume a run exactly: model, optimizer, LR schedule, task scheduler,
RNG states, step and weights version, under `checkpoints/step-N/`.

The model goes through `save_pretrained`, so every checkpoint is also a loadable HF
model directory (`posttrain eval --model runs/x/checkpoints/step-40`). A checkpoint is
written to a temporary directory and renamed into place, so a crash mid-write never
leaves a half checkpoint that resume would pick up.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(s: dict[str, Any]) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])


def save_checkpoint(run_dir: Path, step: int, model: Any, tokenizer: Any, trainer_state: dict[str, Any],
                    keep: int = 2) -> Path:
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save({**trainer_state, "rng": rng_state()}, tmp / "trainer_state.pt")
    (tmp / "step.json").write_text(json.dumps({"step": step}))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in sorted(list_checkpoints(run_dir))[:-keep] if keep > 0 else []:
        shutil.rmtree(root / f"step-{old}", ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[int]:
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    steps = []
    for p in root.iterdir():
        if p.name.startswith("step-") and (p / "step.json").is_file():
            steps.append(int(p.name.split("-", 1)[1]))
    return sorted(steps)


def latest_checkpoint(run_dir: Path) -> Path | None:
    steps = list_checkpoints(run_dir)
    return Path(run_dir) / "checkpoints" / f"step-{steps[-1]}" if steps else None


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    return torch.load(ckpt / "trainer_state.pt", weights_only=False)
