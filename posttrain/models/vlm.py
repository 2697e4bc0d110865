"""The default tiny vision-language policy: LLaVA = SigLIP vision tower + projector + tiny Llama.

    model, tok = build_tiny_vlm(TinyModelConfig(), TinyVisionConfig())
    save_vlm(model, tok, "runs/x/base-vlm")          # save_pretrained: model + processor
    model, tok = load_vlm("runs/x/base-vlm")          # AutoModelForImageTextToText + AutoProcessor

"Native" vision: the SigLIP tower turns a 32x32 image into (32/8)^2 = 16 patch embeddings,
the LLaVA projector maps them into the text model's embedding space, and they replace
the 16 `<image>` placeholder tokens the processor expands in the prompt, so image and
text tokens go through one transformer. Every piece is a stock `transformers` class
(`LlavaForConditionalGeneration`, `LlavaProcessor`, `SiglipImageProcessorPil`), saved and
loaded with `save_pretrained` / `from_pretrained`; `load_vlm` goes through the Auto
classes, so a real checkpoint such as Qwen2.5-VL loads through the same call on a GPU.

`tok` is the processor's tokenizer with the processor attached as `tok.processor`: the
trainer and engines take a tokenizer everywhere, and vision code finds the processor on
it (`processor_of`). A text-only tokenizer has none, which is how an image prompt sent to
a text-only model is caught (posttrain/rollout/vision.py).

Limits: one image resolution (the processor resizes everything to `image_size`); no
video; the tiny model learns only coarse visual facts (colour, position, count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrain.config import TinyModelConfig, TinyVisionConfig
from posttrain.errors import ModelError

# Like tiny.CHAT_TEMPLATE, but a message's content may also be a list of parts
# ({"type": "image"} / {"type": "text", "text": ...}), the format multimodal processors use.
VLM_CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_processor(tok: Any, vcfg: TinyVisionConfig) -> Any:
    """A LlavaProcessor: resize to image_size, scale to [-1, 1], expand `<image>` to one token per patch."""
    from transformers import LlavaProcessor

    try:  # transformers 5: the PIL backend needs no torchvision
        from transformers import SiglipImageProcessorPil as ImageProcessor
    except ImportError:  # transformers 4.x
        from transformers import SiglipImageProcessor as ImageProcessor
    ip = ImageProcessor(size={"height": vcfg.image_size, "width": vcfg.image_size}, do_resize=True,
                                 do_rescale=True, do_normalize=True, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    tok.chat_template = VLM_CHAT_TEMPLATE
    return LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=vcfg.patch_size,
                          vision_feature_select_strategy="full", image_token="<image>",
                          num_additional_image_tokens=0, chat_template=VLM_CHAT_TEMPLATE)


def build_tiny_vlm(cfg: TinyModelConfig | None = None, vcfg: TinyVisionConfig | None = None,
                   seed: int = 0) -> tuple[Any, Any]:
    """A freshly initialised tiny LLaVA (fp32) and its tokenizer (with `.processor`)."""
    import torch
    from transformers import LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, SiglipVisionConfig

    from posttrain.models.tiny import build_tokenizer

    cfg, vcfg = cfg or TinyModelConfig(), vcfg or TinyVisionConfig()
    if vcfg.image_size % vcfg.patch_size:
        raise ModelError(f"model.vision.image_size {vcfg.image_size} is not a multiple of patch_size {vcfg.patch_size}")
    tok = build_tokenizer()
    vision = SiglipVisionConfig(hidden_size=vcfg.hidden_size, intermediate_size=vcfg.intermediate_size,
                                num_hidden_layers=vcfg.num_hidden_layers, num_attention_heads=vcfg.num_attention_heads,
                                image_size=vcfg.image_size, patch_size=vcfg.patch_size, num_channels=3)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                       num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                       num_key_value_heads=cfg.num_key_value_heads, max_position_embeddings=cfg.max_position_embeddings,
                       rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                         vision_feature_select_strategy="full", vision_feature_layer=-1, projector_hidden_act="gelu",
                         image_seq_length=(vcfg.image_size // vcfg.patch_size) ** 2, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    tok.processor = build_processor(tok, vcfg)
    return model, tok


def save_vlm(model: Any, tok: Any, path: str | Path) -> Path:
    """Model and processor (which saves the tokenizer and chat template) in HF format."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(p)
    processor = processor_of(tok)
    (processor if processor is not None else tok).save_pretrained(p)
    return p


def load_vlm(path: str | Path, dtype: str = "float32") -> tuple[Any, Any]:
    """`(model, tokenizer-with-.processor)` from an HF image-text-to-text directory."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from posttrain.models.io import hf_model_dir

    p = hf_model_dir(path)
    try:
        processor = AutoProcessor.from_pretrained(p)
        model = AutoModelForImageTextToText.from_pretrained(p, dtype=getattr(torch, dtype))
    except (OSError, ValueError, KeyError) as e:
        raise ModelError(f"cannot load vision-language model from {p}: {str(e).splitlines()[0]}") from None
    tok = getattr(processor, "tokenizer", None)
    if tok is None or tok.eos_token_id is None:
        raise ModelError(f"processor in {p} has no tokenizer with an EOS token; generation could never stop")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    tok.processor = processor
    return model.eval(), tok


def is_vision_dir(path: str | Path) -> bool:
    """True when an HF model directory (or run) holds a vision-language model (config has vision_config)."""
    import json

    from posttrain.models.io import hf_model_dir

    try:
        cfg = json.loads((hf_model_dir(path) / "config.json").read_text())
    except (OSError, ValueError, ModelError):
        return False  # the text loader then names what is wrong with the directory
    return isinstance(cfg, dict) and "vision_config" in cfg


def processor_of(tok: Any) -> Any:
    """The multimodal processor attached to a tokenizer, or None for a text-only model."""
    return getattr(tok, "processor", None)


def accepts_images(model: Any) -> bool:
    """True when the model has a vision tower (LLaVA, Qwen2-VL, Idefics3, ...)."""
    cfg = getattr(model, "config", None)
    return getattr(cfg, "vision_config", None) is not None


def model_name(model: Any) -> str:
    cfg = getattr(model, "config", None)
    path = getattr(cfg, "_name_or_path", "") or ""
    arch = (getattr(cfg, "architectures", None) or [type(model).__name__])[0]
    return f"{arch} ({path})" if path else arch
