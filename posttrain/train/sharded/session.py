"""Rank 0's handle on the sharded trainer: what the sft/dpo/rl recipes call instead of
touching a model and an optimiser directly.

    sh = ShardedSession.start(model, cfg.trainer, cfg.sft.optim, pad_id=tok.pad_token_id)
    row = sh.step("supervised_step", {...})   # every rank trains its dp slice; rank 0 gets the row
    plain = sh.export_model()                 # a plain HF model on rank 0 (for save_pretrained)
    sh.close()

`start` takes rank 0's full model, builds the sharded copy on every rank (wrap.py) from
it, and drops nothing the caller still references: callers rebind `model = None`.
The optimiser is AdamW over each rank's shards, so its state is sharded with them.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import torch

from posttrain.parallel.group import Driver, RankContext, close_driver, current_driver, handler


@handler("setup")
def setup(ctx: RankContext, p: dict) -> None:
    from posttrain.parallel.accounting import CommMeter
    from posttrain.parallel.mesh import build_mesh
    from posttrain.parallel.wrap import build_sharded

    import torch.distributed as dist

    ctx.opts = p["opts"]
    ctx.mesh = build_mesh(dist.get_world_size(), ctx.opts.tp)
    ctx.extra["pad_id"] = p["pad_id"]
    ctx.meter = CommMeter()
    with ctx.meter:  # the setup broadcast is not a training step: counted apart
        ctx.model = build_sharded(p["hf_config"], p["dtype"], ctx.mesh, ctx.opts, ctx.extra.pop("full_state", {}),
                                  ctx.extra.pop("buffers", None))
        ctx.ref = None
        if p.get("ref"):  # rl.kl_coef > 0: the reference policy, sharded like the policy, never trained
            import dataclasses

            ref_opts = dataclasses.replace(ctx.opts, activation_checkpointing=False)
            ctx.ref = build_sharded(p["hf_config"], p["dtype"], ctx.mesh, ref_opts, ctx.extra.pop("ref_state", {}),
                                    ctx.extra.get("ref_buffers"), frozen=True)
            ctx.ref.register_forward_pre_hook(_count_tokens(ctx, "ref_forwards"), with_kwargs=True)
        ctx.extra.pop("ref_buffers", None)
    ctx.model.register_forward_pre_hook(_count_tokens(ctx, "forwards"), with_kwargs=True)
    from posttrain.train.optim import build_optimizer

    ctx.opt = build_optimizer([q for q in ctx.model.parameters() if q.requires_grad], p["optim"])
    ctx.meter.reset()


def _count_tokens(ctx: RankContext, field: str) -> Any:
    def hook(module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            getattr(ctx.meter, field).append(int(ids.numel()))
    return hook


class ShardedSession:
    def __init__(self, driver: Driver, hf_config: Any) -> None:
        self.driver, self.hf_config = driver, hf_config

    @property
    def ctx(self) -> RankContext:
        return self.driver.ctx

    @classmethod
    def start(cls, model: Any, tcfg: Any, optim: Any, pad_id: int, ref: Any = None) -> "ShardedSession":
        """`optim`: the phase's OptimConfig (every rank builds its AdamW from it, train/optim.py; rank 0's
        schedule sends the lr with each step). `ref`: the KL reference model (RL with rl.kl_coef > 0)."""
        from posttrain.parallel.wrap import ShardOptions

        driver = current_driver(tcfg.timeout_s)
        opts = ShardOptions(tp=tcfg.tp, mixed_precision=tcfg.mixed_precision,
                            activation_checkpointing=tcfg.gradient_checkpointing)
        driver.ctx.extra["full_state"] = {k: v.detach() for k, v in model.state_dict().items()}
        driver.ctx.extra["buffers"] = {k: b.detach().clone() for k, b in model.named_buffers()}
        if ref is not None:
            driver.ctx.extra["ref_state"] = {k: v.detach() for k, v in ref.state_dict().items()}
            driver.ctx.extra["ref_buffers"] = {k: b.detach().clone() for k, b in ref.named_buffers()}
        hf_config = copy.deepcopy(model.config)
        dtype = next(model.parameters()).dtype
        driver.call("setup", {"hf_config": hf_config, "dtype": dtype, "opts": opts, "optim": optim,
                              "pad_id": pad_id, "ref": ref is not None})
        return cls(driver, hf_config)

    def step(self, name: str, payload: dict) -> dict:
        row = self.driver.call(name, payload)
        return {**row, **self.driver.call("account", None)}

    def export_model(self) -> Any:
        """The full weights as a plain HF model on rank 0 (gathered one tensor at a time)."""
        from transformers import AutoModelForCausalLM

        state = self.driver.call("full_state", None)
        with torch.device("meta"):
            plain = AutoModelForCausalLM.from_config(self.hf_config, dtype=next(iter(state.values())).dtype)
        plain.to_empty(device="cpu")
        plain.tie_weights()
        plain.load_state_dict(state, strict=False)
        with torch.no_grad():
            for name, buf in self.ctx.model.named_buffers():  # rotary inv_freq: not in a state dict
                plain.get_buffer(name).copy_(buf)
        return plain.eval()

    def close(self) -> None:
        close_driver()


@handler("set_options")
def _set_options(ctx: RankContext, p: dict) -> None:
    """e.g. {"account": False}: a benchmark times steps without the accounting dispatch mode."""
    import dataclasses

    ctx.opts = dataclasses.replace(ctx.opts, **p)


@handler("full_state")
def _full_state(ctx: RankContext, p: Any) -> dict:
    from posttrain.parallel.wrap import full_model_state

    return full_model_state(ctx.model)


@handler("ref_state")
def _ref_state(ctx: RankContext, p: Any) -> dict:
    """The KL reference's full weights on rank 0 (saved with each checkpoint, as one process does)."""
    from posttrain.parallel.wrap import full_model_state

    return full_model_state(ctx.ref)


@handler("account")
def _account(ctx: RankContext, p: Any) -> dict:
    from posttrain.parallel.accounting import step_accounting

    return step_accounting(ctx)


def active() -> bool:
    """True on rank 0 of a multi-process job (torchrun or trainer.world_size=N)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and int(os.environ.get("RANK", "0")) == 0


# Every handler, registered on every rank that imports the session (followers included).
import posttrain.parallel.dcp  # noqa: E402,F401
import posttrain.train.sharded.rng  # noqa: E402,F401
import posttrain.train.sharded.steps  # noqa: E402,F401
import posttrain.train.sharded.sync  # noqa: E402,F401
