"""The supervised `SupervisedTrainer` over N ranks (train/supervised.py has the protocol, the loop and
the one-process trainer).

    trainer = ShardedSupervisedTrainer.start(model, cfg.trainer, cfg.sft.optim, cfg.sft.steps, pad_id)
    row = trainer.step(objective, batch, step)    # steps.supervised_step on every rank, at the schedule's lr
    trainer.save(run_dir, step, tok, state, keep) # DCP shards + the usual manifested step-N/ (checkpoint.py)
    trainer.restore(ckpt, ts)                     # any world size: DCP shards, or a one-process checkpoint
    trainer = supervised_trainer(model, cfg.trainer, cfg.sft.optim, cfg.sft.steps, pad_id)  # this, or local

Rank 0 holds no optimizer, only the LR schedule (optim.LRSchedule, the same numbers as the
one-process LambdaLR); it ships the batch, the objective without its data (`for_ranks()`), the lr
and `trainer.grad_accum` to the ranks, each of which trains its dp slice (steps.supervised_step). So a run at
world size N draws the same batches, in the same order, at the same learning rates as one
process; steps.py makes the gradients the same.
"""

from __future__ import annotations

import math
from typing import Any

from posttrain.config import OptimConfig, TrainerConfig
from posttrain.train.optim import LRSchedule
from posttrain.train.sharded.session import ShardedSession, active
from posttrain.train.supervised import Batch, LocalSupervisedTrainer, SupervisedObjective, SupervisedTrainer


def supervised_trainer(model: Any, tcfg: TrainerConfig, optim: OptimConfig, steps: int,
                       pad_id: int) -> SupervisedTrainer:
    """The trainer for this process's place in the job: sharded over the ranks on rank 0 of a
    multi-process job (WORLD_SIZE > 1; the full model is handed to the shards), else local."""
    if not active():
        return LocalSupervisedTrainer(model, optim, steps, tcfg)
    return ShardedSupervisedTrainer.start(model, tcfg, optim, steps, pad_id)


class ShardedSupervisedTrainer:
    def __init__(self, session: ShardedSession, optim: OptimConfig, steps: int, tcfg: TrainerConfig) -> None:
        self.sh, self.sched, self.accum = session, LRSchedule(optim, steps), max(1, tcfg.grad_accum)

    @classmethod
    def start(cls, model: Any, tcfg: TrainerConfig, optim: OptimConfig, steps: int,
              pad_id: int) -> "ShardedSupervisedTrainer":
        """The full model is handed to the shards; callers drop their reference to it."""
        return cls(ShardedSession.start(model, tcfg, optim, pad_id), optim, steps, tcfg)

    def step(self, objective: SupervisedObjective, batch: Batch, step: int) -> dict[str, float]:
        from posttrain.train.update import NonFiniteLoss

        row = self.sh.step("supervised_step", {"objective": objective.for_ranks(), "items": batch.items,
                                               "logged": batch.logged, "lr": self.sched.lr(), "accum": self.accum})
        if not math.isfinite(row["loss"]):
            raise NonFiniteLoss(f"non-finite {objective.what} loss at step {step}")
        self.sched.step()
        return {**row, "lr": self.sched.lr()}  # as the one-process trainer logs it: the next step's lr

    def evaluate(self, objective: SupervisedObjective) -> dict[str, float]:
        """On the weights gathered on rank 0 (config_check refuses periodic eval at world size N today)."""
        return objective.evaluate(self.sh.export_model())

    def finish(self) -> None:
        pass

    def export_model(self) -> Any:
        return self.sh.export_model()

    def close(self) -> None:
        self.sh.close()

    checkpoints = True

    def save(self, run_dir: Any, step: int, tok: Any, state: dict, keep: int) -> None:
        """The weights and AdamW state as the ranks' DCP shards beside step-N/, which holds the gathered
        HF model and `state` with the LR schedule (checkpoint.py)."""
        from posttrain.train.sharded.checkpoint import save_sharded

        save_sharded(self.sh, run_dir, step, tok, {**state, "lr_scheduler": self.sched.state_dict()}, keep)

    def restore(self, ckpt: Any, ts: dict) -> None:
        """A checkpoint of any world size: DCP shards (N ranks), or a one-process run's weights and
        optimizer (1 -> N); then the LR schedule (LambdaLR's state reads the same)."""
        from posttrain.train.sharded.checkpoint import load_sharded

        load_sharded(self.sh, ckpt, ts, weights=True)
        self.sched.load_state_dict(ts["lr_scheduler"])
