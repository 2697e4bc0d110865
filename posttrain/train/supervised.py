"""The one supervised loop: SFT (chat JSONL, demonstrations, image tasks) and DPO (text or image
pairs), in this process or sharded over N ranks.

    objective = EncodedSFT(items, cfg.sft, pad_id)            # or DemoSFT, PairObjective (sft.py, dpo.py)
    trainer = supervised_trainer(model, cfg.trainer, cfg.sft.optim, cfg.sft.steps, pad_id)  # sharded/supervised.py
    history = train_supervised(objective, trainer, cfg.sft.steps, seed, eval_every, on_step)
    model = trainer.export_model(); trainer.close()

    for step in range(steps):
        batch = objective.draw(rng)                    # the step's examples, from one seeded generator
        row = trainer.step(objective, batch, step)     # forward/backward/clip/AdamW/schedule, here or on the ranks
        row |= batch.logged | (trainer.evaluate(objective) every eval_every steps and at the last)
        on_step(step, row)                             # metrics.jsonl, trackers, progress (the recipe's)

What varies is passed in, never branched on, as in the RL loop (train/rl.py): the data kind is a
`SupervisedObjective` (what a batch is and its loss), the execution a `SupervisedTrainer`
(`LocalSupervisedTrainer` here; `ShardedSupervisedTrainer` in train/sharded/supervised.py ships
the batch and the objective's loss to the ranks, where steps.supervised_step runs it on dp slices;
`sharded.supervised.supervised_trainer` picks one, so this module never imports train/sharded/).
Both build their optimizer and schedule from the phase's `optim` section (train/optim.py). A
non-finite loss stops the run with `NonFiniteLoss` naming the kind, the step and the micro-batch.

Checkpoints and resume (train/supervised_checkpoint.py): with `checkpoints=SupervisedCheckpoints(...)`
the loop saves every `checkpoints.every` steps, at the end, and after the step in flight on Ctrl-C
(then raises KeyboardInterrupt); `resume=True` continues from the newest intact checkpoint with the
same batches, weights, optimizer and schedule, so the result equals an uninterrupted run's.

The sharded trainer checkpoints too (its weights and optimizer as DCP shards, train/sharded/checkpoint.py),
and a checkpoint resumes at any world size: N ranks' shards load into one process here (2 -> 1),
a one-process checkpoint into the shards (1 -> 2).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import torch

from posttrain.config import OptimConfig, TrainerConfig
from posttrain.train.optim import build_optimizer, build_schedule
from posttrain.train.step_memory import step_memory

OnStep = Callable[[int, dict], None]  # (step, metrics row)


@dataclass
class Batch:
    """One step's examples. `items` is split into micro-batches by stride (`items[k::accum]`) and,
    sharded, into dp slices; `logged` are batch facts for the metrics row (SFT: tokens)."""
    items: list
    logged: dict[str, float] = field(default_factory=dict)


class SupervisedObjective(Protocol):
    """A data kind: what the loop draws and what it differentiates. `loss` must need nothing of the
    objective but its settings: the sharded trainer ships `for_ranks()` (no data) to every rank."""
    what: str  # "SFT", "DPO": names the loss in errors

    def draw(self, rng: random.Random) -> Batch: ...

    def loss(self, model: Any, items: Sequence[Any], batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        """`items` (a micro-batch or dp slice of `batch`)'s share of the batch loss (the shares sum to
        it), and its shares of the batch's other metrics (DPO: accuracy, margin)."""
        ...

    def describe(self, items: Sequence[Any]) -> str: ...  # names the examples of a failing micro-batch

    def evaluate(self, model: Any) -> dict[str, float]: ...  # held-out eval/ metrics ({} without held-out data)

    def for_ranks(self) -> "SupervisedObjective": ...  # the same loss without the data set and held-out data


class SupervisedTrainer(Protocol):
    def step(self, objective: SupervisedObjective, batch: Batch, step: int) -> dict[str, float]: ...  # loss, grad_norm, lr
    def evaluate(self, objective: SupervisedObjective) -> dict[str, float]: ...
    def finish(self) -> None: ...  # after the last step (the local model goes to eval mode)
    def export_model(self) -> Any: ...  # the trained model (gathered on rank 0 when sharded)
    def close(self) -> None: ...
    # checkpoints (train/supervised_checkpoint.py); `checkpoints` False: save and restore are never called
    checkpoints: bool
    def save(self, run_dir: Any, step: int, tok: Any, state: dict, keep: int) -> None: ...
    def restore(self, ckpt: Any, ts: dict) -> None: ...


class LocalSupervisedTrainer:
    """The model and its AdamW in this process: gradient accumulation over `trainer.grad_accum`
    micro-batches, bf16 autocast per `trainer.precision`, gradient norm clipped to 1."""

    def __init__(self, model: Any, optim: OptimConfig, steps: int, tcfg: TrainerConfig | None = None) -> None:
        from posttrain.train.lora import trainable_parameters

        # tcfg None: fp32, no accumulation (the demonstration warm-ups and vision SFT always ran so)
        self.model, self.tcfg = model, tcfg or TrainerConfig(precision="fp32")
        self.params = trainable_parameters(model)
        self.opt = build_optimizer(self.params, optim)
        self.sched = build_schedule(self.opt, optim, steps)
        self.accum = max(1, self.tcfg.grad_accum)

    def step(self, objective: SupervisedObjective, batch: Batch, step: int) -> dict[str, float]:
        from posttrain.train.lora import autocast
        from posttrain.train.update import NonFiniteLoss

        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        row: dict[str, float] = {"loss": 0.0}
        for k in range(self.accum):
            items = batch.items[k::self.accum]
            if not items:
                continue
            with autocast(self.tcfg):
                loss, stats = objective.loss(self.model, items, batch)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise NonFiniteLoss(f"non-finite {objective.what} loss at step {step}, micro-batch {k}"
                                    f"{objective.describe(items)}")
            loss.backward()
            for key, v in {"loss": value, **stats}.items():
                row[key] = row.get(key, 0.0) + v
        row["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.params, 1.0))
        self.opt.step()
        self.sched.step()
        row["lr"] = self.sched.get_last_lr()[0]  # the lr of the next step
        return row

    def evaluate(self, objective: SupervisedObjective) -> dict[str, float]:
        return objective.evaluate(self.model)

    def finish(self) -> None:
        self.model.eval()

    def export_model(self) -> Any:
        return self.model

    def close(self) -> None:
        pass

    checkpoints = True

    def save(self, run_dir: Any, step: int, tok: Any, state: dict, keep: int) -> None:
        """train/checkpoint.py's atomic checkpoint: the HF model directory plus the exact resume state."""
        from posttrain.train.checkpoint import save_checkpoint
        from posttrain.train.lora import export_model
        from posttrain.train.supervised_checkpoint import trainable_state

        state = {**state, "weights": trainable_state(self.model), "optimizer": self.opt.state_dict(),
                 "lr_scheduler": self.sched.state_dict()}
        save_checkpoint(run_dir, step, export_model(self.model), tok, state, keep=keep)

    def restore(self, ckpt: Any, ts: dict) -> None:
        from pathlib import Path

        from posttrain.train.supervised_checkpoint import load_trainable_state

        if "dcp" in ts:  # written by N ranks (train/sharded/checkpoint.py), resumed by one
            from posttrain.parallel.dcp import load_into_plain

            load_into_plain(self.model, self.opt, Path(ckpt).parent / ts["dcp"], ts["lr_scheduler"].get("_last_lr"))
        else:
            load_trainable_state(self.model, ts["weights"])
            self.opt.load_state_dict(ts["optimizer"])
        self.sched.load_state_dict(ts["lr_scheduler"])


class SupervisedRun:
    """The loop one step at a time, for callers that check something between steps (the quickstart's
    validation pass@1, the agent warm-ups): `row = run.step()`. `history` holds every row."""

    def __init__(self, objective: SupervisedObjective, trainer: SupervisedTrainer, steps: int, seed: int = 0,
                 eval_every: int = 0, on_step: OnStep | None = None) -> None:
        self.objective, self.trainer, self.steps = objective, trainer, steps
        self.rng = random.Random(seed)  # the only source of batch order: same seed, same batches, any world size
        self.eval_every, self.on_step = eval_every, on_step
        self.history: list[dict] = []

    def step(self) -> dict[str, float]:
        step = len(self.history)
        batch = self.objective.draw(self.rng)
        row = {**self.trainer.step(self.objective, batch, step), **batch.logged}
        if self.eval_every and ((step + 1) % self.eval_every == 0 or step + 1 == self.steps):
            row.update(self.trainer.evaluate(self.objective))
        row.update(step_memory())  # mem/*: resident at the step's end, the run's peak so far
        self.history.append(row)
        if self.on_step is not None:
            self.on_step(step, row)
        return row


def train_supervised(objective: SupervisedObjective, trainer: SupervisedTrainer, steps: int, seed: int = 0,
                     eval_every: int = 0, on_step: OnStep | None = None,
                     stop: Callable[[int, dict], bool] | None = None, checkpoints: Any = None) -> list[dict]:
    """Run `steps` steps (fewer when `stop(step, row)` returns True); returns the metrics row of each.
    `checkpoints` (supervised_checkpoint.SupervisedCheckpoints, used when the trainer keeps them):
    resume from, save every N steps, at the end and on Ctrl-C (then KeyboardInterrupt)."""
    run = SupervisedRun(objective, trainer, steps, seed, eval_every, on_step)
    if checkpoints is None or not trainer.checkpoints:
        while len(run.history) < steps:
            row = run.step()
            if stop is not None and stop(len(run.history) - 1, row):
                break
    else:
        _checkpointed(run, checkpoints, stop)
    trainer.finish()
    return run.history


def _checkpointed(run: SupervisedRun, checkpoints: Any, stop: Callable[[int, dict], bool] | None) -> None:
    from posttrain.train.supervised_checkpoint import SigintHeld

    checkpoints.restore(run)
    with SigintHeld().active() as sigint:  # Ctrl-C lands between steps: every checkpoint is of a whole step
        while len(run.history) < run.steps:
            row = run.step()
            step = len(run.history) - 1
            if checkpoints.due(step) or sigint.pending:
                checkpoints.save(run, step)
            if sigint.pending:
                raise KeyboardInterrupt
            if stop is not None and stop(step, row):
                break
        if run.history and checkpoints.saved_step != len(run.history) - 1:
            checkpoints.save(run, len(run.history) - 1)
