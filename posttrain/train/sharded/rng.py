"""Each rank's RNG states in a sharded checkpoint (train/sharded/checkpoint.py calls these handlers).

    sh.driver.call("save_rank_rng", {"path": ".../dcp-step-7"})               # ranks r > 0: rng-r.pt there
    sh.driver.call("load_rank_rng", {"path": ".../dcp-step-7" | None, "rank0": ts["rng"]})

Rank 0's states are `ts["rng"]` (save_checkpoint takes them, the caller's loop restores them, as in
one process), so rank 0 writes and reads no file here. Every other rank r keeps its own
(train/checkpoint.py rng_state: python, numpy, torch, CUDA once in use) in `rng-r.pt` beside its
DCP shards; on resume it takes that file, or rank 0's states when it has none (a checkpoint of
fewer ranks, a one-process one, or one written before ranks saved theirs): deterministic, so the
same resume twice draws the same. Apart from checkpoint.py (which imports session.py) so that
session.py can register these on every rank without an import cycle.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from posttrain.parallel.group import RankContext, handler


def _rng_file(path: str, rank: int) -> Path:
    return Path(path) / f"rng-{rank}.pt"


@handler("save_rank_rng")
def _save_rank_rng(ctx: RankContext, p: dict) -> None:
    import torch.distributed as dist

    from posttrain.train.checkpoint import rng_state

    rank = dist.get_rank()
    if rank == 0:
        return
    out = _rng_file(p["path"], rank)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:  # fsynced like the shards: step-N/ will vouch for it
        torch.save(rng_state(), f)
        f.flush()
        os.fsync(f.fileno())


@handler("load_rank_rng")
def _load_rank_rng(ctx: RankContext, p: dict) -> None:
    import torch.distributed as dist

    from posttrain.train.checkpoint import set_rng_state

    rank = dist.get_rank()
    if rank == 0:
        return
    own = _rng_file(p["path"], rank) if p["path"] else None
    # weights_only=False: numpy's state is an array in a tuple; the file is this run's own
    set_rng_state(torch.load(own, weights_only=False) if own is not None and own.is_file() else p["rank0"])
