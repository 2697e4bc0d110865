"""Checkpoints of the one supervised loop (train/supervised.py): `posttrain sft|dpo --resume RUN`
continues an interrupted run with no duplicated or missing steps and the same final weights.

    ckpts = SupervisedCheckpoints(run_dir, tok, every=cfg.sft.checkpoint_every, resume=ctx.resume,
                                  truncate=metrics.truncate_after)
    history = train_supervised(objective, trainer, steps, seed, eval_every, on_step, checkpoints=ckpts)

A checkpoint (train/checkpoint.py save_checkpoint: written into `.tmp-step-N/`, manifest, renamed)
holds the trained weights (all trainable parameters: the LoRA adapters, or the whole model, so a
full fine-tune's checkpoint holds its weights twice: once loadable by HF, once exact for resume),
the optimizer and LR-schedule state, the objective's data-order RNG (SupervisedRun.rng), the
global RNGs, the step and the metric rows so far. It is written every `every` steps (0: only at
an interrupt and at the end) and after the last finished step when Ctrl-C arrives: SIGINT during
a step is held until the step (and its metrics row) is done, so the checkpoint is always of a
whole step; a second Ctrl-C interrupts at once, unsaved.

At world size N (trainer.world_size=N) the trainer writes its weights and optimizer as DCP shards
beside step-N/, and every other rank its own RNG states with them (train/sharded/checkpoint.py); the
rest is the same and lives on rank 0, which runs this loop (the global RNGs here are rank 0's). The
launcher (parallel/launch.py) hands a Ctrl-C to rank 0 alone, so the other ranks stay alive for the
checkpoint's collectives; they stop when rank 0 exits.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch


def trainable_state(model: Any) -> dict[str, torch.Tensor]:
    """Copies of the parameters the optimizer updates (LoRA: the adapters only), by name."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)


@dataclass
class SupervisedCheckpoints:
    run_dir: Path
    tok: Any
    every: int = 0  # steps between checkpoints; 0: only at an interrupt and at the end
    resume: bool = False  # continue from the newest intact checkpoint of run_dir
    truncate: Callable[[int], None] | None = None  # drop metric rows after a step (MetricsLog.truncate_after)
    keep: int = 2
    saved_step: int = -1

    def due(self, step: int) -> bool:
        return bool(self.every) and (step + 1) % self.every == 0

    def save(self, run: Any, step: int) -> None:
        """Checkpoint `run` (train/supervised.py SupervisedRun) after its step `step`."""
        state = {"step": step, "kind": run.objective.what, "data_rng": run.rng.getstate(),
                 "history": run.history[:step + 1]}
        run.trainer.save(self.run_dir, step, self.tok, state, self.keep)
        self.saved_step = step

    def restore(self, run: Any) -> None:
        """Load the newest intact checkpoint into `run` (a fresh SupervisedRun); without one, start
        over and drop any metric rows an interrupted segment logged."""
        if not self.resume:
            return
        from posttrain.errors import ConfigError
        from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state, set_rng_state

        ckpt = latest_checkpoint(self.run_dir)
        if ckpt is None:
            if self.truncate is not None:
                self.truncate(-1)
            return
        ts = load_trainer_state(ckpt)
        if ts.get("kind") != run.objective.what:
            raise ConfigError(f"--resume {self.run_dir}: checkpoint {ckpt} is not of a {run.objective.what} run "
                              f"(it holds {ts.get('kind', 'an RL')} state)")
        run.trainer.restore(ckpt, ts)
        run.rng.setstate(ts["data_rng"])
        set_rng_state(ts["rng"])
        run.history[:] = ts["history"]
        self.saved_step = ts["step"]
        if self.truncate is not None:
            self.truncate(ts["step"])


class SigintHeld:
    """While active (main thread only), a first SIGINT is recorded, not raised: `pending` tells the
    loop to checkpoint and stop after the step in flight. A second SIGINT raises at once."""

    def __init__(self) -> None:
        self.pending = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.pending:
            raise KeyboardInterrupt
        self.pending = True

    @contextlib.contextmanager
    def active(self) -> Iterator["SigintHeld"]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        before = signal.signal(signal.SIGINT, self._handle)  # asyncio.run's own handler only cancels at an await
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, before)
