"""The `optim` section every training phase has (`sft.optim`, `dpo.optim`, `rl.optim`): one
optimizer and LR schedule, with each phase's own defaults, and the keys it replaced (`rl.lr`,
`sft.warmup_steps`, ...), still read. posttrain/train/optim.py builds the optimizer from it.

config_schema.py and config_rl.py declare each phase's field with `phase_optim(phase)`;
config.py renames the legacy keys in YAML trees and overrides (LEGACY_OPTIM_KEYS).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BeforeValidator, Field
from typing_extensions import Annotated

from posttrain.config_components import Section


class OptimConfig(Section):
    """One trainer's optimizer and LR schedule (posttrain/train/optim.py builds both). Each phase
    has its own (`rl.optim`, `sft.optim`, `dpo.optim`) with its own defaults (OPTIM_DEFAULTS): a
    partial section (`rl.optim.lr=1e-4`) keeps the phase's other defaults."""

    name: Literal["adamw"] = "adamw"
    lr: float = Field(default=1e-4, gt=0.0)
    betas: tuple[Annotated[float, Field(ge=0.0, lt=1.0)], Annotated[float, Field(ge=0.0, lt=1.0)]] = (0.9, 0.999)
    eps: float = Field(default=1e-8, gt=0.0)
    weight_decay: float = Field(default=0.0, ge=0.0)
    schedule: Literal["constant", "cosine"] = "constant"  # after the warm-up: flat, or cosine down to 10% of lr
    warmup: int = Field(default=0, ge=0)  # steps of linear warm-up from lr/warmup to lr


# Each phase's optimizer defaults. RL keeps betas (0.9, 0.99), the values every recorded RL result
# was measured with (docs/training.md "Optimizer"); SFT and DPO keep torch's (0.9, 0.999), and DPO
# torch AdamW's default weight decay 0.01, which its one-process loop always had.
OPTIM_DEFAULTS: dict[str, dict[str, Any]] = {
    "rl": {"lr": 3e-5, "betas": (0.9, 0.99), "schedule": "constant", "warmup": 20},
    "sft": {"lr": 3e-3, "betas": (0.9, 0.999), "schedule": "cosine", "warmup": 10},
    "dpo": {"lr": 1e-4, "betas": (0.9, 0.999), "weight_decay": 0.01, "schedule": "cosine", "warmup": 5},
}
# The keys before `optim` existed, still read (config.py renames them in YAML trees and overrides).
LEGACY_OPTIM_KEYS: dict[str, dict[str, str]] = {
    "rl": {"lr": "lr", "warmup_steps": "warmup"},
    "sft": {"lr": "lr", "warmup_steps": "warmup", "weight_decay": "weight_decay"},
    "dpo": {"lr": "lr", "warmup_steps": "warmup"},
}


def phase_optim(phase: str) -> Any:
    """The `optim` field of `phase`: a given mapping is laid over the phase's defaults."""
    def merge(v: Any) -> Any:
        if isinstance(v, OptimConfig):
            return v
        return {**OPTIM_DEFAULTS[phase], **(v or {})} if isinstance(v, dict) else v
    return Field(default_factory=lambda: OptimConfig(**OPTIM_DEFAULTS[phase])), BeforeValidator(merge)


def move_legacy_optim_keys(phase: str, data: Any) -> Any:
    """`rl.lr` -> `rl.optim.lr` (and the other LEGACY_OPTIM_KEYS) in one section's raw mapping;
    a key given both ways with different values is an error naming both."""
    if not isinstance(data, dict) or not any(k in data for k in LEGACY_OPTIM_KEYS[phase]):
        return data
    data, optim = dict(data), dict(data.get("optim") or {})
    for old, new in LEGACY_OPTIM_KEYS[phase].items():
        if old in data:
            value = data.pop(old)
            if new in optim and optim[new] != value:
                raise ValueError(f"{phase}.{old}={value!r} and {phase}.optim.{new}={optim[new]!r} disagree; "
                                 f"set {phase}.optim.{new} only")
            optim[new] = value
    data["optim"] = optim
    return data
