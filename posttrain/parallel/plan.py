"""The tensor-parallel plan of a Llama-style decoder (the tiny model, HF Llama, Qwen2/3, Mistral).

Per decoder layer (Megatron's split, as torchtitan applies it through DTensor):
    self_attn.q_proj / k_proj / v_proj   ColwiseParallel   (heads split across tp ranks)
    self_attn.o_proj                     RowwiseParallel   (partial sums all-reduced)
    mlp.gate_proj / up_proj              ColwiseParallel
    mlp.down_proj                        RowwiseParallel
Embeddings, norms and the (tied) LM head stay replicated across tp ranks, so each layer
costs two all-reduces of the activations forward and two backward.

Limits: no sequence parallelism (norm activations are replicated); attention heads,
key/value heads and the MLP width must divide by tp, which `tp_unsupported_reason` checks.
"""

from __future__ import annotations

from typing import Any

COLWISE = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")
ROWWISE = ("self_attn.o_proj", "mlp.down_proj")


def decoder_layers(model: Any) -> list[Any]:
    """The transformer blocks of an HF causal LM (`model.model.layers`)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__}: no model.layers; sharding supports HF decoder-only models")
    return list(layers)


def tp_unsupported_reason(hf_config: Any, tp: int) -> str | None:
    """Why this model cannot be split `tp` ways, or None."""
    if tp == 1:
        return None
    for key in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
        v = getattr(hf_config, key, None)
        if v is None or v % tp:
            return f"{key}={v} does not divide by trainer.tp={tp}"
    return None


def layer_plan() -> dict[str, Any]:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {**{n: ColwiseParallel() for n in COLWISE}, **{n: RowwiseParallel() for n in ROWWISE}}


def apply_tp(model: Any, tp_mesh: Any) -> None:
    """Split every decoder layer's projections over `tp_mesh` in place."""
    from torch.distributed.tensor.parallel import parallelize_module

    from posttrain.errors import ConfigError

    why = tp_unsupported_reason(model.config, tp_mesh.size())
    if why:
        raise ConfigError(f"tensor parallelism: {why}")
    for layer in decoder_layers(model):
        parallelize_module(layer, tp_mesh, layer_plan())
