"""Image inputs for the `fast` engine: LLaVA-style VLMs (a vision tower and a projector in
front of a Llama/Qwen2/Mistral text model).

    enc = ImageEncoder.from_hf(vlm)              # copies the tower and projector
    feats = enc.features(request.images)         # [image tokens, hidden]
    x = embed(ids); x[ids == enc.image_token_id] = feats   # the prompt's input embeddings

The engine runs the text model itself (model.py, from the VLM's language model) and
prefills an image prompt from these embeddings. The tower and projector are the engine's
own copies, so they change only through `load_weights`, with the text weights, and are
verified the same way (`views`). Image prompts bypass the paged prompt store: its keys are
token ids, and two different images expand to the same `<image>` ids.

Limits: the image features come from the model's own `get_image_features`, called with
the request's image inputs; models whose text part needs more than 1-D positions
(Qwen2-VL's M-RoPE) are not supported by the fast forward and are rejected at start-up.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import torch

from posttrain.errors import ModelError

TEXT_PREFIX = "model.language_model."  # HF names of a LLaVA-style VLM's text decoder


def is_vlm(model: Any) -> bool:
    """A LLaVA-style VLM: `model.model.language_model` plus a vision tower and a projector."""
    inner = getattr(model, "model", None)
    return all(hasattr(inner, a) for a in ("language_model", "vision_tower", "multi_modal_projector")) \
        and hasattr(model.config, "text_config")


class ImageEncoder:
    """The engine's copy of a VLM's vision tower and projector, and the image token id."""

    def __init__(self, model: Any) -> None:
        inner = model.model
        # a shallow clone of the multimodal wrapper whose module table holds deep copies of the
        # tower and projector and no text model: get_image_features runs, nothing is shared
        self.net = copy.copy(inner)
        self.net._modules = {k: (copy.deepcopy(m) if k in ("vision_tower", "multi_modal_projector") else None)
                             for k, m in inner._modules.items()}
        self.net.eval()
        cfg = model.config
        self.image_token_id = int(cfg.image_token_id)
        self.layer_args = {k: getattr(cfg, k) for k in ("vision_feature_layer", "vision_feature_select_strategy")
                           if getattr(cfg, k, None) is not None}
        self.views = {f"model.{k}.{n}": p.data for k in ("vision_tower", "multi_modal_projector")
                      for n, p in self.net._modules[k].named_parameters()}

    @classmethod
    def from_hf(cls, model: Any) -> "ImageEncoder":
        if not is_vlm(model):
            raise ModelError(f"{type(model).__name__} is not a LLaVA-style VLM (vision tower + projector + "
                             f"language model); the fast engine cannot take its images")
        return cls(model)

    def features(self, images: Sequence[Mapping[str, Any]], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Image token embeddings [sum of image tokens, hidden] for one request's image inputs."""
        from posttrain.rollout.vision import concat_inputs

        inputs = concat_inputs(list(images))
        with torch.no_grad():
            out = self.net.get_image_features(**inputs, **self.layer_args, return_dict=True)
        feats = out.pooler_output if hasattr(out, "pooler_output") else out
        if isinstance(feats, (list, tuple)):
            feats = torch.cat([f.reshape(-1, f.shape[-1]) for f in feats], 0)
        return feats.reshape(-1, feats.shape[-1]).to(device=device, dtype=dtype)
