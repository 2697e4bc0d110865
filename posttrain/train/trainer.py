"""What holds the RL policy: a `Trainer` owns the model, the optimizer and its LR schedule, the
update, weight sync to the engine, and its share of a checkpoint.

    trainer = default_trainer(cfg, model, tok, ref)     # here, or sharded over N ranks (train/sharded/trainer.py)
    stats = trainer.update(trajs, adv)                   # one clipped policy-gradient update, lr schedule stepped
    sync_row = trainer.push_weights(engine, version)     # the engine holds the new weights as `version`
    trainer.save(run_dir, step, tok, state, keep)        # step-N/ (+ DCP shards when sharded)
    trainer.restore(ckpt, ts)                            # optimizer, schedule, LoRA adapters, from trainer_state

The RL loop (train/rl.py) holds one and never asks which kind it is. Both build their
optimizer and schedule from `rl.optim` (train/optim.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import torch

from posttrain.train.loss_norm import StepCounts
from posttrain.train.optim import build_optimizer, build_schedule
from posttrain.types import Trajectory


class Trainer(Protocol):
    # counts: the step's sample and token counts (loss_norm.step_counts) for rl.loss_norm's denominator
    def update(self, trajs: Sequence[Trajectory], adv: torch.Tensor, correction: Any = None,
               lr_scale: float = 1.0, counts: StepCounts | None = None) -> dict[str, float]: ...
    def lr(self) -> float: ...
    def push_weights(self, engine: Any, version: int) -> dict[str, float]: ...
    def snapshot(self) -> Mapping[str, torch.Tensor]: ...
    def save(self, run_dir: Path, step: int, tok: Any, state: dict, keep: int) -> None: ...
    def restore(self, ckpt: Path, ts: dict) -> None: ...
    def export_model(self) -> Any: ...


class LocalTrainer:
    """The policy (through lora.prepare_model: LoRA, gradient checkpointing), its optimizer and its
    KL reference, in this process."""

    def __init__(self, cfg: Any, model: Any, ref_model: Any, pad_id: int) -> None:
        from posttrain.train.lora import trainable_parameters

        self.cfg, self.model, self.ref_model, self.pad_id = cfg, model, ref_model, pad_id
        self.opt = build_optimizer(trainable_parameters(model), cfg.rl.optim)
        self.lr_sched = build_schedule(self.opt, cfg.rl.optim, cfg.rl.steps)

    def update(self, trajs: Sequence[Trajectory], adv: torch.Tensor, correction: Any = None,
               lr_scale: float = 1.0, counts: StepCounts | None = None) -> dict[str, float]:
        """`lr_scale` multiplies this one update's lr; the schedule's step sets every group's lr again.
        `counts` (loss_norm.step_counts) sets rl.loss_norm's denominator; None: each minibatch's own tokens."""
        from posttrain.train.update import update_policy

        if lr_scale != 1.0:
            for group in self.opt.param_groups:
                group["lr"] *= lr_scale
        rl = self.cfg.rl
        if correction is None and rl.rollout_correction:  # config_check: only with rl.old_logprobs=recompute
            from posttrain.train.async_rl.correction import correction_for

            correction = correction_for(rl.offpolicy)  # its trainer-logprob pass is the recompute
        extra = {} if correction is None else {"correction": correction}
        stats = update_policy(self.model, self.opt, trajs, adv, self.cfg.rl, self.pad_id, self.ref_model,
                              self.cfg.trainer, **extra, counts=counts)
        self.lr_sched.step()
        return stats

    def lr(self) -> float:
        return self.lr_sched.get_last_lr()[0]

    def push_weights(self, engine: Any, version: int) -> dict[str, float]:
        from posttrain.train.rl_model import plain_state

        engine.load_weights(plain_state(self.model), version)  # LoRA merged in, read-only
        return {}

    def snapshot(self) -> Mapping[str, torch.Tensor]:
        """A copy of the plain weights that later updates do not touch (the async producer's)."""
        from posttrain.train.rl_model import plain_state

        return {k: v.detach().clone() for k, v in plain_state(self.model).items()}

    def save(self, run_dir: Path, step: int, tok: Any, state: dict, keep: int) -> None:
        from posttrain.train.checkpoint import save_checkpoint
        from posttrain.train.lora import export_model
        from posttrain.train.rl_model import adapter_state

        state = {**state, "optimizer": self.opt.state_dict(), "lr_scheduler": self.lr_sched.state_dict(),
                 "lora": adapter_state(self.model)}  # lora: None without LoRA
        if self.ref_model is not None:
            state["ref_model"] = self.ref_model.state_dict()
        save_checkpoint(run_dir, step, export_model(self.model), tok, state, keep=keep)

    def restore(self, ckpt: Path, ts: dict) -> None:
        from posttrain.train.rl_model import load_adapter_state

        if "dcp" in ts:  # written by N ranks, resumed by one (parallel/dcp.py)
            from posttrain.parallel.dcp import load_into_plain

            load_into_plain(self.model, self.opt, Path(ckpt).parent / ts["dcp"], ts["lr_scheduler"].get("_last_lr"))
        else:
            self.opt.load_state_dict(ts["optimizer"])
        self.lr_sched.load_state_dict(ts["lr_scheduler"])
        if ts.get("lora") is not None:
            load_adapter_state(self.model, ts["lora"])

    def export_model(self) -> Any:
        return self.model


def reference_model(cfg: Any, model: Any, ts: dict | None) -> Any:
    """The KL reference (rl.kl_coef > 0): the plain base before any LoRA, or the run's saved base."""
    if cfg.rl.kl_coef <= 0:
        return None
    ref = copy.deepcopy(model).eval()
    if ts is not None and "ref_model" in ts:  # the run's base, not the resumed policy
        ref.load_state_dict(ts["ref_model"])
    return ref


def default_trainer(cfg: Any, model: Any, tok: Any, ref: Any) -> Trainer:
    """Sharded over the ranks on rank 0 of a multi-process job (trainer.world_size > 1), else here."""
    from posttrain.train.lora import prepare_model
    from posttrain.train.sharded.session import active as sharded_active

    if not sharded_active():
        return LocalTrainer(cfg, prepare_model(model, cfg.trainer, cfg.seed), ref, tok.pad_token_id)
    from posttrain.train.sharded.trainer import ShardedTrainer

    return ShardedTrainer.start(cfg, model, tok, ref)
