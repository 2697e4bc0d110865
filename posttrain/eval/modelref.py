"""`--model DIR_OR_RUN`: an HF model directory, or a training run (its newest checkpoint).

    ref = resolve_model("runs/rl-1")     # -> runs/rl-1/checkpoints/step-40, source_run=runs/rl-1
    ref.hash                             # sha256 over the directory's files (config, tokenizer, weights)

The hash keys the generation cache and is recorded in the run's meta.json, so a resumed
evaluation refuses to mix samples from two different models.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import ModelError
from posttrain.store.run import CHECKPOINT_PREFIX, CHECKPOINTS, RunDir

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".json", ".model", ".txt", ".jinja")


@dataclass(frozen=True)
class ModelRef:
    path: Path
    source_run: Path | None  # the training run it came from, for reward/pass-rate curves
    hash: str


def _latest_checkpoint(run: Path) -> Path | None:
    rd = RunDir(run)
    steps = [s for s in rd.checkpoint_steps() if (rd.checkpoint(s) / "config.json").is_file()]
    return rd.checkpoint(steps[-1]) if steps else None


def hash_model_dir(path: Path) -> str:
    """sha256 over (relative name, bytes) of every model file, in name order."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    for p in files:
        h.update(str(p.relative_to(path)).encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def model_dir_of(dir_or_run: str | Path) -> tuple[Path, Path | None]:
    """(HF model directory, the training run it came from or None) for a model directory or a
    run directory (its newest checkpoint): what `eval --model` and `serve` accept alike."""
    p = Path(dir_or_run)
    if not p.exists():
        raise ModelError(f"model not found: {p.resolve()} (give an HF model directory or a training run directory)")
    if (p / "config.json").is_file():
        run = RunDir(p.parent.parent)
        in_run = run.checkpoints == p.parent  # runs/x/checkpoints/step-N: its run's curves come along
        return p, run.path if in_run and run.metrics.exists() else None
    ckpt = _latest_checkpoint(p) if p.is_dir() else None
    if ckpt is None:
        raise ModelError(f"{p} is neither an HF model directory (no config.json) "
                         f"nor a training run with {CHECKPOINTS}/{CHECKPOINT_PREFIX}N/")
    return ckpt, p


def resolve_model(dir_or_run: str | Path) -> ModelRef:
    path, run = model_dir_of(dir_or_run)
    return ModelRef(path, run, hash_model_dir(path))
