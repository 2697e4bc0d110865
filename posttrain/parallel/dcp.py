"""Sharded checkpoints with torch.distributed.checkpoint (DCP), resumable at any world size.

    sh.driver.call("dcp_save", {"path": ".../dcp-step-7"})    # every rank writes its shards
    sh.driver.call("dcp_load", {"path": ...})                # any world size: DCP reshards on load
    load_into_plain(model, opt, path)                        # one process, no process group (2 -> 1)
    export_hf(path, config_dir, out_dir)                     # a plain HF safetensors directory

A DCP directory holds {"model", "optim"} keyed by parameter names (FQNs), so the layout
does not depend on the mesh: 2 ranks' shards load into 1 process or 4. The RL checkpoint
(train/sharded/trainer.py, `ShardedTrainer.save`) writes the DCP directory next to `checkpoints/step-N/`,
then the usual atomic, manifested `step-N/` (HF weights gathered on rank 0, trainer state
naming its DCP directory), so resume sees a step only once both are complete: no duplicated
or missing steps; the supervised trainer (train/sharded/supervised.py) checkpoints the same way
(both through train/sharded/checkpoint.py). A checkpoint of a one-process run (a torch optimizer
state, and a supervised run's weights) loads into a sharded trainer through `load_plain_optim`
and `load_plain_weights` (1 -> 2).

Limits: DCP writes one file per rank per checkpoint; the HF copy in step-N/ is a full gather
on rank 0 (no rank but 0 holds it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrain.parallel.group import RankContext, handler


def _states(model: Any, opt: Any) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    return {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}


def _apply(model: Any, opt: Any, sd: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    set_model_state_dict(model, sd["model"])
    set_optimizer_state_dict(model, opt, sd["optim"])


@handler("dcp_save")
def dcp_save(ctx: RankContext, p: dict) -> None:
    import torch.distributed.checkpoint as dcp

    dcp.save(_states(ctx.model, ctx.opt), checkpoint_id=str(p["path"]))


@handler("dcp_load")
def dcp_load(ctx: RankContext, p: dict) -> None:
    import torch.distributed.checkpoint as dcp

    sd = _states(ctx.model, ctx.opt)
    dcp.load(sd, checkpoint_id=str(p["path"]))
    _apply(ctx.model, ctx.opt, sd)


@handler("load_plain_optim")
def load_plain_optim(ctx: RankContext, p: dict) -> None:
    """Rank 0's one-process optimizer state (ctx.extra["plain_optim"], indices in parameter
    order) into every rank's shards, by parameter name."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    full: dict[str, Any] = {}
    if dist.get_rank() == 0:
        plain = ctx.extra.pop("plain_optim")
        names = [n for n, q in ctx.model.named_parameters() if q.requires_grad]
        full = {"state": {names[i]: s for i, s in plain["state"].items()},
                "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in plain["param_groups"]]}
    set_optimizer_state_dict(ctx.model, ctx.opt, full,
                             options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))


@handler("load_plain_weights")
def load_plain_weights(ctx: RankContext, p: dict) -> None:
    """Rank 0's one-process weights (ctx.extra["plain_weights"], full tensors by parameter name: a
    supervised checkpoint's trainable weights) into every rank's shards (1 -> 2)."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    full = ctx.extra.pop("plain_weights") if dist.get_rank() == 0 else {}
    # strict=False: parameters only (a tied head and the rotary buffers are not in it)
    set_model_state_dict(ctx.model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True,
                                                                    strict=False))


def load_into_plain(model: Any, opt: Any, path: str | Path, lrs: list[float] | None = None) -> None:
    """A sharded checkpoint into an ordinary one-process model and optimizer (no process group).

    The sharded ranks' optimizer never saw an LR scheduler (rank 0 sends each step's lr), so
    its param groups carry neither `initial_lr` nor the next lr: both stay this optimizer's,
    and `lrs` (the saved scheduler's `_last_lr`, the next step's lr) sets the lr."""
    import warnings

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import DefaultLoadPlanner

    sd = _states(model, opt)
    keep = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    with warnings.catch_warnings():  # "no process group: loading in non-distributed mode", as intended
        warnings.simplefilter("ignore")
        dcp.load(sd, checkpoint_id=str(path), no_dist=True, planner=DefaultLoadPlanner(allow_partial_load=True))
    _apply(model, opt, sd)
    for g, k, lr in zip(opt.param_groups, keep, lrs or [None] * len(keep)):
        g.update(k)
        if lr is not None:
            g["lr"] = lr


def export_hf(path: str | Path, config_dir: str | Path, out_dir: str | Path) -> Path:
    """The model of a DCP checkpoint as a plain HF directory (safetensors), in one process."""
    import warnings

    import torch.distributed.checkpoint as dcp
    from transformers import AutoConfig, AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(config_dir))
    sd = {"model": model.state_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(sd, checkpoint_id=str(path), no_dist=True)
    model.load_state_dict(sd["model"])
    out = Path(out_dir)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(out, safe_serialization=True)
    return out
