"""SFT and DPO on a session the caller started: the one supervised loop (train/supervised.py) with
the sharded trainer (supervised.py here). No loop lives here; these name the objective for callers
that hold a `ShardedSession` (the equivalence tests' rank job, benchmarks/sharded_train.py).

    hist = train_encoded_sharded(sh, items, cfg.sft, cfg.trainer)     # = sft.train_encoded at world size N
    hist = train_dpo_sharded(sh, pairs, ref, cfg.dpo, cfg.trainer)    # = dpo.train_dpo at world size N

Recipes do not call these: they take `supervised.supervised_trainer`, sharded on rank 0 of N.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from posttrain.train.sharded.session import ShardedSession
from posttrain.train.sharded.supervised import ShardedSupervisedTrainer
from posttrain.train.supervised import train_supervised


def train_encoded_sharded(sh: ShardedSession, train: Sequence[Any], cfg: Any, tcfg: Any, seed: int = 0,
                          on_step: Callable[[int, dict], None] | None = None) -> list[dict]:
    """`sft.train_encoded` at world size N (no periodic eval)."""
    from posttrain.train.sft import EncodedSFT

    return train_supervised(EncodedSFT(train, cfg, sh.ctx.extra["pad_id"]),
                            ShardedSupervisedTrainer(sh, cfg.optim, cfg.steps, tcfg), cfg.steps, seed, on_step=on_step)


def train_dpo_sharded(sh: ShardedSession, pairs: Sequence[Any], ref: torch.Tensor, cfg: Any, tcfg: Any, seed: int = 0,
                      on_step: Callable[[int, dict], None] | None = None) -> list[dict]:
    """`dpo.train_dpo` at world size N (no periodic eval)."""
    from posttrain.train.dpo import PairObjective

    return train_supervised(PairObjective(pairs, ref, cfg, sh.ctx.extra["pad_id"]),
                            ShardedSupervisedTrainer(sh, cfg.optim, cfg.steps, tcfg), cfg.steps, seed, on_step=on_step)
