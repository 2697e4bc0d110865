"""The RL policy under the shared trainer machinery (`trainer:`): LoRA, gradient checkpointing, bf16.

    model = prepare_model(base, cfg.trainer, cfg.seed)  # lora.py: LoRA-wrap (from the seed) and/or checkpointing
    state = plain_state(model)                 # full HF-named weights for the engine (LoRA merged)
    plain = export_model(model)                # a plain HF model for a checkpoint directory

With LoRA the engine still holds full weights: each sync reads W + scale * B A for every
adapted layer without touching the trained model (peft's merge_adapter/unmerge_adapter
would add and subtract the delta in place, and the base drifts in fp32 over a run). A
checkpoint directory holds the merged plain model, so evaluation and `posttrain eval` load
it like any HF model, and `trainer_state.pt` holds the adapter weights; resuming rebuilds
base + LoRA from the run's base model and those weights, so it is exact.
"""

from __future__ import annotations

from typing import Any


def is_lora(model: Any) -> bool:
    return hasattr(model, "peft_config")


def plain_state(model: Any) -> dict[str, Any]:
    """HF-named, detached full weights of `model`; LoRA deltas merged in, LoRA tensors left out."""
    if not is_lora(model):
        return {k: v.detach() for k, v in model.state_dict().items()}
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    deltas = {}
    for name, m in base.named_modules():
        if isinstance(m, LoraLayer):
            with_delta = [m.get_delta_weight(a) for a in m.active_adapters if a in m.lora_A]
            if with_delta:
                deltas[name] = sum(with_delta)  # [out, in], like the base weight
    out = {}
    for k, v in base.state_dict().items():
        if ".lora_" in k:
            continue
        name = k.replace(".base_layer.", ".")
        module = name.rsplit(".", 1)[0]
        if name.endswith(".weight") and module in deltas:
            v = v + deltas[module]
        out[name] = v.detach()
    return out


def adapter_state(model: Any) -> dict[str, Any] | None:
    if not is_lora(model):
        return None
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}


def load_adapter_state(model: Any, state: dict[str, Any]) -> None:
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(model, state)
