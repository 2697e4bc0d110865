"""Rank 0's SFT and DPO loops over a sharded trainer.

Each draws its batches with the same seeded generator, in the same order, as the
one-process loop it stands for (`sft.train_encoded`, `dpo.train_dpo`), and the LR comes
from the same schedule, so a run at world size N and one at world size 1 see the same
data and the same learning rates; steps.py makes their gradients the same.

Limits: no periodic eval inside the loop (`sft.eval_every` / `dpo.eval_every` are refused
with trainer.world_size > 1 by config_check); the recipe evaluates the exported model.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

import torch

from posttrain.train.sharded.session import ShardedSession


def _lr(optim: Any, steps: int) -> Callable[[int], float]:
    """The one-process loop's LambdaLR value at each step (optim.lr x train/optim.lr_factor)."""
    from posttrain.train.optim import lr_factor

    f = lr_factor(optim, steps)
    return lambda step: optim.lr * f(step)


def _check(loss: float, what: str) -> None:
    from posttrain.train.update import NonFiniteLoss

    if not math.isfinite(loss):
        raise NonFiniteLoss(f"non-finite {what}")


def train_encoded_sharded(sh: ShardedSession, train: Sequence[Any], cfg: Any, tcfg: Any, seed: int = 0,
                          on_step: Callable[[int, dict], None] | None = None) -> list[dict]:
    """`sft.train_encoded` at world size N (no periodic eval)."""
    from posttrain.train.sft import _trunc

    rng = random.Random(seed)
    lr = _lr(cfg.optim, cfg.steps)
    history = []
    for step in range(cfg.steps):
        batch = [train[rng.randrange(len(train))] for _ in range(cfg.batch_size)]
        n_tok = sum(sum(m[1:]) for _, m in (_trunc(e, cfg.max_len) for e in batch))
        row = sh.step("sft_step", {"items": batch, "n_tok": n_tok, "lr": lr(step), "accum": max(1, tcfg.grad_accum),
                                   "pack": cfg.pack, "max_len": cfg.max_len})
        _check(row["loss"], f"SFT loss at step {step}")
        row.update({"lr": lr(step + 1), "tokens": n_tok})  # as train_encoded logs it: after the scheduler step
        history.append(row)
        if on_step is not None:
            on_step(step, row)
    return history


def train_dpo_sharded(sh: ShardedSession, pairs: Sequence[Any], ref: torch.Tensor, cfg: Any, tcfg: Any, seed: int = 0,
                      on_step: Callable[[int, dict], None] | None = None) -> list[dict]:
    """`dpo.train_dpo` at world size N (no periodic eval)."""
    rng = random.Random(seed)
    lr = _lr(cfg.optim, cfg.steps)
    history = []
    for step in range(cfg.steps):
        idx = [rng.randrange(len(pairs)) for _ in range(min(cfg.batch_size, len(pairs)))]
        row = sh.step("dpo_step", {"pairs": [pairs[i] for i in idx], "ref": ref[idx], "cfg": cfg,
                                   "lr": lr(step), "accum": max(1, tcfg.grad_accum)})
        _check(row["loss"], f"DPO loss at step {step}")
        history.append(row)
        if on_step is not None:
            on_step(step, row)
    return history


def run_sharded_sft(cfg: Any, model: Any, pad_id: int, data: Sequence[Any],
                    on_step: Callable[[int, dict], None] | None) -> tuple[list[dict], Any]:
    """The sft recipe's training phase on rank 0 of N (recipes/sft.py imports it when WORLD_SIZE > 1)."""
    return run_sharded("sft", cfg, model, pad_id, data, on_step)


def run_sharded_dpo(cfg: Any, model: Any, pad_id: int, data: Sequence[Any],
                    on_step: Callable[[int, dict], None] | None, ref: torch.Tensor) -> tuple[list[dict], Any]:
    return run_sharded("dpo", cfg, model, pad_id, data, on_step, ref)


def run_sharded(kind: str, cfg: Any, model: Any, pad_id: int, data: Sequence[Any],
                on_step: Callable[[int, dict], None] | None, ref: torch.Tensor | None = None) -> tuple[list[dict], Any]:
    """The `posttrain sft|dpo` recipe's training phase at world size N: (history, plain exported model).
    The full model is handed to the shards and dropped; the export gathers it back on rank 0."""
    sec = cfg.sft if kind == "sft" else cfg.dpo
    sh = ShardedSession.start(model, cfg.trainer, sec.optim, pad_id)
    del model
    if kind == "sft":
        hist = train_encoded_sharded(sh, data, sec, cfg.trainer, cfg.seed, on_step)
    else:
        hist = train_dpo_sharded(sh, data, ref, sec, cfg.trainer, cfg.seed, on_step)
    plain = sh.export_model()
    sh.close()
    return hist, plain
