"""Checkpoints of a sharded run, shared by the RL trainer (trainer.py) and the supervised one
(supervised.py): the ranks' DCP shards beside the usual manifested `checkpoints/step-N/`.

    save_sharded(sh, run_dir, step, tok, state, keep)   # RNGs and DCP shards, then step-N/ (gathered HF model + state)
    load_sharded(sh, ckpt, ts, weights=True)            # DCP (any world size) or a one-process checkpoint

The shards (parallel/dcp.py: {"model", "optim"} by parameter name) are written first into
`dcp-step-N/`, then the atomic `step-N/` naming them (`ts["dcp"]`), so resume sees a step only
once both are whole. Shards of steps no longer kept are deleted with their checkpoints. A
one-process checkpoint (no "dcp") loads into the shards from rank 0: its optimizer state
(`ts["optimizer"]`) and, with `weights`, its trainable weights (`ts["weights"]`, the supervised
checkpoint's; the RL trainer's weights come in through load_policy at start).

RNG states: rank 0's are `ts["rng"]`, as in a one-process checkpoint; every other rank writes its
own beside its shards (`dcp-step-N/rng-r.pt`) and restores it on resume, so a model with dropout
draws the masks an uninterrupted run would on every rank; a rank the checkpoint has none for takes
rank 0's (rng.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from posttrain.store.run import RunDir
from posttrain.train.sharded.session import ShardedSession


def save_sharded(sh: ShardedSession, run_dir: Path, step: int, tok: Any, state: dict, keep: int) -> None:
    """`state`: the trainer state of step-N/ (the caller's, with its LR schedule); "dcp" and
    "world_size" are added."""
    from posttrain.train.checkpoint import list_checkpoints, save_checkpoint

    run = RunDir(run_dir)
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    shards = run.dcp_checkpoint(step)
    shutil.rmtree(shards, ignore_errors=True)  # a half-written one of an earlier segment
    # before the shards: a follower runs commands in order and rank 0's dcp_save returns only once
    # every rank has joined it, so every rank's RNG file is on disk before step-N/ names the shards
    sh.driver.call("save_rank_rng", {"path": str(shards)})
    sh.driver.call("dcp_save", {"path": str(shards)})
    # "dcp": the shards' name beside the checkpoint (load_sharded joins it to the checkpoint's parent)
    state = {**state, "dcp": shards.name, "world_size": sh.driver.world}
    save_checkpoint(run_dir, step, sh.export_model(), tok, state, keep=keep)
    kept = {run.dcp_checkpoint(s) for s in list_checkpoints(run_dir)}
    for old in run.dcp_checkpoints():
        if old not in kept:
            shutil.rmtree(old, ignore_errors=True)


def load_sharded(sh: ShardedSession, ckpt: Path, ts: dict, weights: bool) -> None:
    """The shards' weights and optimizer, and the other ranks' RNG states, from checkpoint `ckpt`
    (trainer state `ts`); the caller restores its own LR schedule and rank 0's RNGs (`ts["rng"]`)."""
    shards = str(Path(ckpt).parent / ts["dcp"]) if "dcp" in ts else None
    if shards is not None:  # written at any world size: DCP reshards on load
        sh.driver.call("dcp_load", {"path": shards})
    else:
        if weights:  # a one-process supervised checkpoint (1 -> N)
            sh.ctx.extra["plain_weights"] = ts["weights"]
            sh.driver.call("load_plain_weights", None)
        sh.ctx.extra["plain_optim"] = ts["optimizer"]
        sh.driver.call("load_plain_optim", None)
    sh.driver.call("load_rank_rng", {"path": shards, "rank0": ts["rng"]})

