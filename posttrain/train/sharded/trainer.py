"""The RL `Trainer` over N ranks (train/trainer.py has the protocol and the one-process one).

    trainer = ShardedTrainer.start(cfg, model, tok, ref)   # shards on every rank; rank 0 drops its copy
    stats = trainer.update(trajs, adv)                     # steps.rl_update on every rank, at lr()
    trainer.push_weights(engine, version)                  # bucketed, verified (sync.py)
    trainer.save(run_dir, step, tok, state, keep)          # DCP shards + the usual manifested step-N/
    trainer.restore(ckpt, ts)                              # DCP (any world size) or a one-process optimizer

Each rank holds its AdamW over its shards (built by session.setup from `rl.optim`); rank 0
holds only the LR schedule (optim.LRSchedule) and sends each update's lr with it. The engine
keeps its own full copy, as at world size 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from posttrain.train.optim import LRSchedule
from posttrain.train.sharded.session import ShardedSession
from posttrain.types import Trajectory


class ShardedTrainer:
    def __init__(self, cfg: Any, session: ShardedSession) -> None:
        self.cfg, self.sh = cfg, session
        self.sched = LRSchedule(cfg.rl.optim, cfg.rl.steps)

    @classmethod
    def start(cls, cfg: Any, model: Any, tok: Any, ref: Any = None) -> "ShardedTrainer":
        """`ref`: the KL reference (rl.kl_coef > 0), sharded on every rank."""
        import posttrain.parallel.dcp  # noqa: F401  (handlers)
        import posttrain.train.sharded.sync  # noqa: F401

        return cls(cfg, ShardedSession.start(model, cfg.trainer, cfg.rl.optim, tok.pad_token_id, ref=ref))

    def update(self, trajs: Sequence[Trajectory], adv: torch.Tensor, correction: Any = None,
               lr_scale: float = 1.0, counts: Any = None) -> dict[str, float]:
        """`counts` is unused: each rank divides by its own tokens (rl.loss_norm=kept_tokens); config
        load refuses another loss_norm with trainer.world_size > 1 (config_check)."""
        if correction is not None or lr_scale != 1.0:
            from posttrain.errors import ConfigError

            raise ConfigError("the sharded trainer does not apply an off-policy correction or a staleness lr scale "
                              "yet; run with trainer.world_size=1 or rl.max_staleness=0")
        row = self.sh.step("rl_update", {"trajs": list(trajs), "adv": adv, "cfg": self.cfg.rl, "lr": self.sched.lr()})
        self.sched.step()
        return row

    def lr(self) -> float:
        return self.sched.lr()

    def push_weights(self, engine: Any, version: int) -> dict[str, float]:
        from posttrain.train.sharded.sync import push_buckets

        stats = push_buckets(self.sh, engine, version, bucket_bytes=int(self.cfg.trainer.sync_bucket_mb * 2**20))
        return {"sync/buckets": stats.buckets, "sync/bytes": stats.bytes,
                "sync/max_bucket_bytes": stats.max_bucket_bytes, "sync/full_copy": float(stats.full_copy)}

    def snapshot(self) -> Mapping[str, torch.Tensor]:
        return self.sh.driver.call("full_state", None)

    def save(self, run_dir: Path, step: int, tok: Any, state: dict, keep: int) -> None:
        """The optimizer goes to DCP shards instead of trainer_state.pt (checkpoint.py); the KL
        reference is gathered, so that any world size can resume with it."""
        from posttrain.train.sharded.checkpoint import save_sharded

        state = {**state, "lr_scheduler": self.sched.state_dict()}
        if self.cfg.rl.kl_coef > 0:
            state["ref_model"] = self.sh.driver.call("ref_state", None)
        save_sharded(self.sh, run_dir, step, tok, state, keep)

    def restore(self, ckpt: Path, ts: dict) -> None:
        """DCP at any world size, or a one-process optimizer (1 -> N: the weights came in through
        load_policy at start)."""
        from posttrain.train.sharded.checkpoint import load_sharded

        load_sharded(self.sh, ckpt, ts, weights=False)
        self.sched.load_state_dict(ts["lr_scheduler"])

    def export_model(self) -> Any:
        return self.sh.export_model()
