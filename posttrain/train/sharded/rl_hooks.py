"""The RL loop's few sharded branches (rl.py calls these when `st.sharded` is set).

    sh, opt = start(cfg, model, tok, ref)   # build_state: the sharded trainer (and KL reference); `opt` only holds the lr
    restore(st, ckpt, ts)                   # resume: DCP (any world size) or a one-process optimizer
    stats = update(st, trajs, adv)          # rl_step: steps.rl_update on every rank
    push_weights(st)                        # sync_weights: bucketed, verified (sync.py)
    save(st, step)                          # save: DCP shards + the usual manifested step-N/

On rank 0 the full model is dropped once the shards exist: `st.model` is None, and the
engine keeps its own copy, as it does at world size 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from posttrain.train.sharded.session import ShardedSession


def start(cfg: Any, model: Any, tok: Any, ref: Any = None) -> tuple[ShardedSession, torch.optim.Optimizer]:
    """`ref`: the KL reference (rl.kl_coef > 0), sharded on every rank; rank 0 can drop its copy."""
    import posttrain.parallel.dcp  # noqa: F401  (handlers)
    import posttrain.train.sharded.sync  # noqa: F401

    opt_kwargs = {"lr": cfg.rl.lr, "weight_decay": 0.0, "betas": (0.9, 0.99), "foreach": True}
    sh = ShardedSession.start(model, cfg.trainer, opt_kwargs, tok.pad_token_id, ref=ref)
    lr_holder = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.rl.lr)  # the LambdaLR's target
    return sh, lr_holder


def restore(st: Any, ckpt: Path, ts: dict) -> None:
    if "dcp" in ts:
        st.sharded.driver.call("dcp_load", {"path": str(Path(ckpt).parent / ts["dcp"])})
    else:  # a one-process checkpoint (1 -> N): the weights came in through load_policy at start
        st.sharded.ctx.extra["plain_optim"] = ts["optimizer"]
        st.sharded.driver.call("load_plain_optim", None)


def update(st: Any, trajs: list, adv: torch.Tensor, **extra: Any) -> dict[str, float]:
    if extra:
        from posttrain.errors import ConfigError

        raise ConfigError(f"the sharded trainer does not apply {', '.join(extra)} yet; run with trainer.world_size=1")
    row = st.sharded.step("rl_update", {"trajs": trajs, "adv": adv, "cfg": st.cfg.rl,
                                        "lr": st.lr_sched.get_last_lr()[0]})
    st.opt.step()  # the lr holder has no gradients: a no-op that keeps LambdaLR's step order check quiet
    return row


def push_weights(st: Any) -> None:
    from posttrain.train.sharded.sync import push_buckets

    stats = push_buckets(st.sharded, st.engine, st.version, bucket_bytes=int(st.cfg.trainer.sync_bucket_mb * 2**20))
    st.sharded.last_sync = {"sync/buckets": stats.buckets, "sync/bytes": stats.bytes,
                            "sync/max_bucket_bytes": stats.max_bucket_bytes, "sync/full_copy": float(stats.full_copy)}


def save(st: Any, step: int, state: dict) -> None:
    """`state` is rl.save's trainer state; the optimizer goes to DCP instead of trainer_state.pt."""
    from posttrain.train.checkpoint import list_checkpoints, save_checkpoint

    root = Path(st.run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    name = f"dcp-step-{step}"
    shutil.rmtree(root / name, ignore_errors=True)
    st.sharded.driver.call("dcp_save", {"path": str(root / name)})
    state = {k: v for k, v in state.items() if k != "optimizer"}
    state.update({"dcp": name, "world_size": st.sharded.driver.world})
    if st.cfg.rl.kl_coef > 0:  # the reference, gathered, so that any world size can resume with it
        state["ref_model"] = st.sharded.driver.call("ref_state", None)
    save_checkpoint(st.run_dir, step, st.sharded.export_model(), st.tok, state, keep=st.cfg.rl.keep_checkpoints)
    kept = {f"dcp-step-{s}" for s in list_checkpoints(st.run_dir)}
    for old in root.glob("dcp-step-*"):
        if old.name not in kept:
            shutil.rmtree(old, ignore_errors=True)
