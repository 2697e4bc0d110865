"""One optimizer and one LR schedule, from a config's `optim` section, for every trainer.

    opt = build_optimizer(params, cfg.rl.optim)              # AdamW with the section's betas, eps, decay
    sched = build_schedule(opt, cfg.rl.optim, cfg.rl.steps)   # LambdaLR over `lr_factor`
    lr = cfg.rl.optim.lr * lr_factor(cfg.rl.optim, steps)(k)  # the lr after k scheduler steps, no optimizer

The RL trainer (one process or sharded), SFT, DPO and vision SFT all build theirs here, each
from its own phase's section (`rl.optim`, `sft.optim`, `dpo.optim`), so one shape and one
factory hold every trainer's step size. The sharded trainer has no optimizer on rank 0: it
asks `lr_factor` for the number and ships it to the ranks.

Schedules (`optim.schedule`), both with a linear warm-up over `optim.warmup` steps:
  constant  the lr after the warm-up (RL)
  cosine    cosine from the end of the warm-up down to 10% of the lr at `total` steps (SFT, DPO)
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import torch

from posttrain.config import OptimConfig

COSINE_FLOOR = 0.1  # the cosine schedule ends at this fraction of optim.lr


def build_optimizer(params: Iterable[torch.nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    """`cfg.name` is a Literal checked at load (config_optim.OptimConfig); adamw is the one there is.
    foreach=True: CPU defaults to a per-tensor loop; the foreach kernels give the same numbers."""
    return torch.optim.AdamW(list(params), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                             weight_decay=cfg.weight_decay, foreach=True)


def lr_factor(cfg: OptimConfig, total: int) -> Callable[[int], float]:
    """The lr multiplier after `step` scheduler steps (LambdaLR's convention)."""
    warm = cfg.warmup
    if cfg.schedule == "constant":
        return lambda step: min(1.0, (step + 1) / max(1, warm))

    def cosine(step: int) -> float:
        if step < warm:
            return (step + 1) / max(1, warm)
        progress = (step - warm) / max(1, total - warm)
        return COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return cosine


def build_schedule(opt: torch.optim.Optimizer, cfg: OptimConfig, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(cfg, total))


class LRSchedule:
    """The same schedule without an optimizer (the sharded trainer's rank 0): `lr()` is what the
    next update uses, `step()` advances; its state dict reads like LambdaLR's, so a checkpoint
    written by either resumes with the other."""

    def __init__(self, cfg: OptimConfig, total: int) -> None:
        self.base, self.factor, self.n = cfg.lr, lr_factor(cfg, total), 0

    def lr(self) -> float:
        return self.base * self.factor(self.n)

    def step(self) -> None:
        self.n += 1

    def state_dict(self) -> dict[str, Any]:
        return {"base_lrs": [self.base], "last_epoch": self.n, "_step_count": self.n + 1,
                "_last_lr": [self.lr()], "_get_lr_called_within_step": False, "lr_lambdas": [None]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.n = int(state["last_epoch"])
