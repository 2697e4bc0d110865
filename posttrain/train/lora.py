"""Shared trainer machinery: LoRA (through peft), gradient checkpointing, bf16 autocast.

    model = prepare_model(model, cfg.trainer, cfg.seed)  # LoRA-wrap (adapters from the seed) / checkpointing
    with autocast(cfg.trainer): loss = ...           # bf16 where the device has it
    save_policy(*export_model(model, tok), out)      # LoRA merged into a plain HF model

A LoRA target module that does not exist in the model is a ConfigError naming it and
listing the linear layers that do exist. Limits: only LoRA (no QLoRA: bitsandbytes is not
a dependency); `precision: auto` picks bf16 on CUDA devices that support it. On a CPU it stays
fp32 (bf16 matmuls are slower than fp32 on CPUs without AMX / AVX512-BF16), except in an RL run
whose rollout engine runs bf16 weight matmuls that this machine measured faster
(`resolve_precision`): there the update's matmuls take the same units.
"""

from __future__ import annotations

import contextlib
from typing import Any

from posttrain.config import TrainerConfig
from posttrain.errors import ConfigError


def linear_module_names(model: Any) -> list[str]:
    """Short names (last path component) of the model's Linear layers, e.g. q_proj."""
    import torch

    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})


def apply_lora(model: Any, tcfg: TrainerConfig, seed: int) -> Any:
    """`model` wrapped with fresh adapters. Their initialisation (peft: A random, B zero) draws from a
    generator seeded with `seed` alone, never from the process's torch RNG, so the same seed gives the same
    adapters whatever ran before (an unseeded warm-up gave two runs of one seed different SFT losses from
    its second step on, and different held-out results)."""
    import torch

    lcfg = tcfg.lora
    have = linear_module_names(model)
    missing = [t for t in lcfg.target_modules if t not in have]
    if missing:
        raise ConfigError(f"trainer.lora.target_modules: no module named {', '.join(map(repr, missing))} in "
                          f"{type(model).__name__}; its linear layers are: {', '.join(have)}")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ConfigError("trainer.lora needs the 'peft' package: pip install 'posttrain[lora]'") from None
    pcfg = LoraConfig(r=lcfg.r, lora_alpha=lcfg.alpha, lora_dropout=lcfg.dropout,
                      target_modules=list(lcfg.target_modules), task_type="CAUSAL_LM")
    import warnings

    with warnings.catch_warnings():  # peft reads transformers' deprecated `is_gradient_checkpointing` alias
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        with torch.random.fork_rng():  # CPU and CUDA: the caller's RNG streams go on as if nothing drew from them
            torch.manual_seed(seed)
            return get_peft_model(model, pcfg)


def prepare_model(model: Any, tcfg: TrainerConfig, seed: int) -> Any:
    """LoRA-wrap (adapters initialised from `seed`: `apply_lora`) and/or checkpointing, as `tcfg` says."""
    if tcfg.grad_accum < 1:
        raise ConfigError(f"trainer.grad_accum must be >= 1, got {tcfg.grad_accum}")
    if tcfg.gradient_checkpointing:
        model.config.use_cache = False
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    if tcfg.lora is not None:
        model = apply_lora(model, tcfg, seed)
    return model


def use_bf16(tcfg: TrainerConfig) -> bool:
    import torch

    if tcfg.precision == "bf16":
        return True
    return tcfg.precision == "auto" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def autocast(tcfg: TrainerConfig | None, device_type: str = "cpu") -> contextlib.AbstractContextManager:
    """bf16 autocast when configured; weights and optimizer state stay fp32 (mixed precision).
    `tcfg` None (a caller given no `trainer:` section): fp32, no autocast."""
    import torch

    if tcfg is None or not use_bf16(tcfg):
        return contextlib.nullcontext()
    dev = "cuda" if torch.cuda.is_available() else device_type
    return torch.autocast(device_type=dev, dtype=torch.bfloat16)


def resolve_precision(tcfg: TrainerConfig, engine_matmul_dtype: str | None) -> TrainerConfig:
    """`tcfg` with `precision: auto` resolved for an RL run on the CPU: bf16 autocast when the rollout
    engine runs its weight matmuls in bf16 *and* this machine measured bf16 matmuls faster than fp32
    (matmul_choice.py, cached per process: `matmul_dtype: auto` has already measured), so `auto` never
    makes an update slower; else unchanged (CUDA: `use_bf16` decides; CPU: fp32). The update then
    needs `rl.old_logprobs: recompute`, which bf16 rollouts already require (config_check.py): the
    ratio's old and new logprobs both come from the trainer's bf16 forward."""
    import torch

    if tcfg.precision != "auto" or torch.cuda.is_available() or engine_matmul_dtype != "bfloat16":
        return tcfg
    from posttrain.rollout.engines.fast.matmul_choice import resolve_matmul_dtype

    if resolve_matmul_dtype("auto", "cpu") != "bfloat16":
        return tcfg
    return tcfg.model_copy(update={"precision": "bf16"})


def export_model(model: Any) -> Any:
    """A plain HF model to save or to hand to an engine: LoRA merged into a copy of the base."""
    if hasattr(model, "merge_and_unload"):
        import copy

        return copy.deepcopy(model).merge_and_unload()
    return model


def trainable_parameters(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.requires_grad]
