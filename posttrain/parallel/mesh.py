"""The process group and device mesh of a sharded run.

    init_group(timeout_s=120)                 # gloo on CPU, nccl with CUDA; every collective times out
    mesh = build_mesh(world_size=4, tp=2)     # ("dp", "tp") = (2, 2); tp=1 -> a 1-D ("dp",) mesh

Ranks come from the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
which `launch.py` sets the same way. Limits: one mesh per process; the tp dimension is the
inner (fastest-varying) one, so tp groups are consecutive ranks (one node on GPUs).
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch

from posttrain.errors import ConfigError


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def env_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def backend() -> str:
    return "nccl" if torch.cuda.is_available() else "gloo"


def device_type() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def init_group(timeout_s: float) -> None:
    """Join the job's process group once; `timeout_s` bounds every collective that follows."""
    import torch.distributed as dist

    from posttrain.parallel.rank_parent import die_with_launcher

    if dist.is_initialized():
        return
    die_with_launcher()
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend(), timeout=datetime.timedelta(seconds=timeout_s))


def check_shape(world_size: int, tp: int) -> None:
    if tp < 1 or world_size % tp:
        raise ConfigError(f"trainer.tp={tp} must divide trainer.world_size={world_size}")


def build_mesh(world_size: int, tp: int = 1) -> Any:
    """A ("dp",) mesh, or ("dp", "tp") with tp innermost."""
    from torch.distributed.device_mesh import init_device_mesh

    check_shape(world_size, tp)
    if tp == 1:
        return init_device_mesh(device_type(), (world_size,), mesh_dim_names=("dp",))
    return init_device_mesh(device_type(), (world_size // tp, tp), mesh_dim_names=("dp", "tp"))


def dp_info(mesh: Any) -> tuple[int, int]:
    """(this rank's dp index, dp size): which slice of a global batch it trains on."""
    dp = mesh["dp"] if "tp" in (mesh.mesh_dim_names or ()) else mesh
    return dp.get_local_rank(), dp.size()
