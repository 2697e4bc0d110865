"""Build the sharded policy on every rank: TP, activation checkpointing, then FSDP2.

    model = build_sharded(hf_config, dtype, mesh, opts, full_state)   # full_state on rank 0, {} elsewhere

Every rank builds the architecture on the meta device (no memory), applies the TP plan
(plan.py) over the mesh's "tp" dimension, checkpoints each decoder layer's activations if
asked, and calls `fully_shard` on each decoder layer and then the root over "dp". Only then
are the parameters allocated (`to_empty`: each rank allocates its own shard) and filled
from rank 0's full state by `set_model_state_dict(broadcast_from_rank0=True)`: one tensor
at a time, so no rank but 0 ever holds a full copy.

Mixed precision (`trainer.mixed_precision`): "bf16" computes in bf16 parameters and
reduces gradients in fp32 (FSDP2's MixedPrecisionPolicy); the sharded master weights and
the optimiser state stay in the model's dtype (fp32). "auto" means bf16 on CUDA and fp32
on CPU: gloo runs the bf16 policy correctly, but CPU bf16 matmuls are slower than fp32 and
the equivalence tests need fp32 to compare at 1e-5.

The RL reference model (rl.kl_coef > 0) is built the same way with `frozen=True`: sharded
like the policy, so no rank holds a full copy of it either.

Limits: HF decoder-only models only (`model.model.layers`); LoRA is not sharded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ShardOptions:
    tp: int = 1
    mixed_precision: str = "auto"  # auto | bf16 | fp32
    activation_checkpointing: bool = False
    reshard_after_forward: bool = True  # ZeRO-3; False keeps gathered layers until backward (ZeRO-2-like)
    account: bool = True  # per-step memory/communication accounting (a dispatch mode: costs time on CPU)

    def param_dtype(self) -> torch.dtype | None:
        bf16 = self.mixed_precision == "bf16" or (self.mixed_precision == "auto" and torch.cuda.is_available())
        return torch.bfloat16 if bf16 else None


def _mp_policy(opts: ShardOptions) -> Any:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    pd = opts.param_dtype()
    return MixedPrecisionPolicy(param_dtype=pd, reduce_dtype=torch.float32 if pd is not None else None)


def _submeshes(mesh: Any) -> tuple[Any, Any | None]:
    names = mesh.mesh_dim_names or ()
    return (mesh["dp"], mesh["tp"]) if "tp" in names else (mesh, None)


def shard_in_place(model: Any, mesh: Any, opts: ShardOptions, frozen: bool = False) -> Any:
    """TP (if the mesh has "tp"), activation checkpointing, fully_shard per layer and root.
    `frozen` (the RL reference model: forward only, no backward): the root reshards after its
    forward too, since no post-backward would ever reshard it."""
    from torch.distributed.fsdp import fully_shard

    from posttrain.parallel.plan import apply_tp, decoder_layers

    dp_mesh, tp_mesh = _submeshes(mesh)
    if tp_mesh is not None:
        apply_tp(model, tp_mesh)
    if opts.activation_checkpointing:
        model.config.use_cache = False
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    mp = _mp_policy(opts)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=opts.reshard_after_forward)
    fully_shard(model, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=frozen)  # root: gathered again at once
    return model


def build_sharded(hf_config: Any, dtype: torch.dtype, mesh: Any, opts: ShardOptions,
                  full_state: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor] | None = None,
                  frozen: bool = False) -> Any:
    """The sharded model on this rank; `full_state`/`buffers` are rank 0's (empty elsewhere).
    `frozen`: a model that is never trained (the KL reference): no gradients, eval mode."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    from transformers import AutoModelForCausalLM

    from posttrain.parallel.mesh import device_type

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=dtype)
    shard_in_place(model, mesh, opts, frozen)
    model.to_empty(device=device_type())
    set_model_state_dict(model, full_state if dist.get_rank() == 0 else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    for name, buf in model.named_buffers():  # non-persistent buffers (rotary inv_freq) are not in a state dict
        if dist.get_rank() == 0:
            buf.copy_(buffers[name])
        dist.broadcast(buf, src=0)
    if frozen:
        model.requires_grad_(False)
        return model.eval()
    model.train()
    return model


def full_model_state(model: Any) -> dict[str, torch.Tensor]:
    """Every full tensor on rank 0 (CPU), nothing elsewhere. For export; sync uses buckets (train/sharded/sync.py)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> float:
    """Global gradient norm over DTensor shards on mixed meshes ((dp, tp) and dp alone), then clip.

    Each rank sums the squares of its local shards; an element replicated on k ranks
    (a tp-replicated norm weight, a parameter of a mesh smaller than the world) is divided
    by k, so the all-reduced sum counts every element once.
    """
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor, Replicate

    world = dist.get_world_size()
    total = torch.zeros((), dtype=torch.float64)
    grads = [p.grad for p in params if p.grad is not None]
    for g in grads:
        if isinstance(g, DTensor):
            copies = world // g.device_mesh.size()
            for dim, pl in enumerate(g.placements):
                if isinstance(pl, Replicate):
                    copies *= g.device_mesh.size(dim)
            local = g.to_local()
        else:
            copies, local = world, g
        total += local.detach().double().pow(2).sum().cpu() / copies
    dist.all_reduce(total)
    norm = float(total.sqrt())
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return norm
