"""What the `fast` forward must do differently per architecture, read from a model's config.

    err = check_supported(json.load(open("model/config.json")))   # None, or one line naming the feature
    arch = arch_of(model.config)                                   # raises ModelError with that line

`check_supported` is pure (a config.json dict in, a message out) so the CLI can refuse a
model at config load, before any training. `Arch` lists the switches the forward reads:

- llama / mistral / qwen2: RMSNorm `w * norm(x)`, SiLU gated MLP, q/k/v biases when the
  checkpoint has them (Qwen2), tied or untied head; Mistral's `sliding_window` on every
  layer, Qwen2's on the layers `layer_types` marks "sliding_attention".
- qwen3: as qwen2 plus a per-head RMSNorm on q and k before the rotary embedding.
- gemma3_text (Gemma3ForCausalLM): per-head q/k norm, Gemma's `(1 + w) * norm(x)` RMSNorm
  everywhere, norms after attention and around the MLP ("sandwich"), GELU-tanh gated MLP,
  embeddings times sqrt(hidden), query scale `query_pre_attn_scalar ** -0.5`, sliding
  and global layers (`layer_types`) with their own rope tables (`rope_parameters` per
  layer type: rope_local_base_freq vs rope_theta), final logit softcapping. HF's Gemma 3
  does not apply `attn_logit_softcapping` (it never passes it to attention), so neither do we.

Rope: the tables come from HF's own rotary module, so any rope type whose frequencies do
not depend on the running sequence length is exact (default, linear, llama3, yarn);
"dynamic" and "longrope" switch frequencies with the current length and are refused.
Limits: refused also are MoE and other model types, quantized checkpoints, Gemma 3's
multimodal wrapper (model_type "gemma3": use its text model) and bidirectional attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from posttrain.errors import ModelError

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")
ROPE_TYPES = ("default", "linear", "llama3", "yarn")
_GEMMA_ACTS = ("gelu_pytorch_tanh",)
_LAYER_TYPES = ("full_attention", "sliding_attention")


def _rope_dicts(cfg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every rope parameter dict of a config: legacy `rope_scaling`, `rope_parameters` (flat,
    or one per layer type as Gemma 3 writes it)."""
    out = []
    rs = cfg.get("rope_scaling")
    if isinstance(rs, Mapping):
        out.append(rs)
    rp = cfg.get("rope_parameters")
    if isinstance(rp, Mapping):
        nested = [v for v in rp.values() if isinstance(v, Mapping)]
        out.extend(nested if nested else [rp])
    return out


def check_supported(config: Mapping[str, Any]) -> str | None:
    """None when the fast engine runs this model exactly, else a one-line reason naming the
    feature. `config` is a model's config.json as a dict (or a PretrainedConfig's to_dict())."""
    mt = config.get("model_type", "")
    if mt == "gemma3":
        return ("fast engine: model_type 'gemma3' (the multimodal Gemma3ForConditionalGeneration) is not supported; "
                "its text model (Gemma3ForCausalLM, model_type 'gemma3_text') is")
    text = config.get("text_config")
    if mt == "llava" and text is None:  # HF's LlavaConfig defaults its text model to Llama
        text = {"model_type": "llama"}
    if isinstance(text, Mapping) and config.get("vision_config") is not None:  # LLaVA-style VLM: its text model
        return check_supported(text)
    if mt not in SUPPORTED:
        return f"fast engine: model_type {mt!r} is not supported (supported: {', '.join(SUPPORTED)}); use engine 'hf'"
    if config.get("quantization_config"):
        return "fast engine: quantized checkpoints (quantization_config) are not supported; use engine 'hf'"
    if mt == "gemma3_text":
        act = config.get("hidden_activation") or config.get("hidden_act") or "gelu_pytorch_tanh"
        if act not in _GEMMA_ACTS:
            return f"fast engine: gemma3 hidden_activation {act!r} is not supported (supported: gelu_pytorch_tanh)"
        if config.get("use_bidirectional_attention"):
            return "fast engine: use_bidirectional_attention is not supported (the fast forward is causal)"
    else:
        act = config.get("hidden_act", "silu")
        if act != "silu":
            return f"fast engine: hidden_act {act!r} is not supported for {mt} (supported: silu)"
    for lt in config.get("layer_types") or ():
        if lt not in _LAYER_TYPES:
            return f"fast engine: layer type {lt!r} is not supported (supported: {', '.join(_LAYER_TYPES)})"
    for d in _rope_dicts(config):
        rt = d.get("rope_type") or d.get("type") or "default"
        if rt not in ROPE_TYPES:
            return f"fast engine: rope_scaling type {rt!r} is not supported (supported: {', '.join(ROPE_TYPES)})"
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if config.get(key):
            return f"fast engine: mixture-of-experts ({key}={config[key]}) is not supported"
    return None


@dataclass(frozen=True)
class Arch:
    """The forward's per-architecture switches (see the module docstring)."""

    gemma: bool  # (1 + w) RMSNorm, sandwich norms, GELU-tanh, scaled embeddings
    qk_norm: bool  # per-head RMSNorm on q and k before the rotary embedding
    attn_scale: float  # multiplies q . k
    windows: tuple[int | None, ...]  # per layer: keys at positions > pos - window are visible; None = all
    rope_keys: tuple[str | None, ...]  # per layer: the rotary module's layer_type argument (None: takes none)
    embed_scale: float | None  # Gemma: sqrt(hidden)
    final_softcap: float | None  # logits = cap * tanh(logits / cap)


def arch_of(cfg: Any, head_dim: int) -> Arch:
    """The switches for a live HF config (a PretrainedConfig); ModelError if unsupported."""
    d = cfg.to_dict()
    d["model_type"] = getattr(cfg, "model_type", d.get("model_type", ""))  # to_dict writes the class's type
    err = check_supported(d)
    if err:
        raise ModelError(err)
    mt = cfg.model_type
    L, max_pos = cfg.num_hidden_layers, cfg.max_position_embeddings
    sw = getattr(cfg, "sliding_window", None)
    types = list(getattr(cfg, "layer_types", None) or ["full_attention"] * L)
    if mt == "mistral":  # HF Mistral: one window for every layer when sliding_window is set
        windows = [sw] * L
    elif mt == "llama":
        windows = [None] * L
    else:  # qwen2 / qwen3 (sliding_window is None unless use_sliding_window) and gemma3_text
        windows = [sw if t == "sliding_attention" else None for t in types]
    windows = [w if w is not None and w < max_pos else None for w in windows]  # a window past the context is none
    gemma = mt == "gemma3_text"
    return Arch(
        gemma=gemma, qk_norm=mt in ("qwen3", "gemma3_text"),
        attn_scale=float(cfg.query_pre_attn_scalar) ** -0.5 if gemma else float(head_dim) ** -0.5,
        windows=tuple(windows), rope_keys=tuple(types) if gemma else (None,) * L,
        embed_scale=float(cfg.hidden_size) ** 0.5 if gemma else None,
        final_softcap=getattr(cfg, "final_logit_softcapping", None) if gemma else None)
