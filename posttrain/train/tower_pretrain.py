"""Self-supervised pretraining of the tiny VLM's vision tower: masked-patch pixel reconstruction.

    losses = pretrain_tower(model, tok, images, TowerPretrainConfig(steps=800))   # images: PIL

Why: a real VLM starts from a pretrained vision encoder (SigLIP was trained on billions of
image-text pairs). The tiny default has none, since nothing can be downloaded here, and a
randomly initialised tower barely responds to small marks: on 32x32 drawings, the holes a
question counts are a few pixels each. So, before the warm-up, the tiny tower learns to
reconstruct the pixels of masked patches of the train tasks' images (SimMIM, Xie et al. 2022).
It sees pixels only, never a question or an answer, so it cannot learn an answer. A real
checkpoint (`model.path`) skips this step.

Per image [3, H, W], with P = patch_size and G = H / P:
1. mask a random `mask_ratio` of the G*G patches (their pixels set to 0, mid-grey in [-1, 1]);
2. the tower encodes the masked image: features [G*G, D], the same layer LLaVA's projector reads;
3. a linear head (discarded afterwards) predicts each patch's 3*P*P pixels from its feature;
4. loss: squared error per pixel, weighted (1 + stroke_weight) where the pixel differs from its
   patch's median (the background). Thin strokes are a few pixels per patch, and an unweighted
   loss is met by the background alone. Masked patches count double, as their pixels must be
   inferred from the neighbours.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from posttrain.config import TowerPretrainConfig
from posttrain.errors import ModelError
from posttrain.models.vlm import processor_of

FEATURE_LAYER = -1  # LLaVA's vision_feature_layer in build_tiny_vlm: the tower's last hidden state


def to_patches(x: torch.Tensor, p: int) -> torch.Tensor:
    """[B, C, H, W] -> [B, (H/p)*(W/p), C*p*p], patches in row-major order (the tower's token order)."""
    b, c, h, w = x.shape
    return x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // p) * (w // p), c * p * p)


def mask_patches(x: torch.Tensor, mask: torch.Tensor, p: int) -> torch.Tensor:
    """x [B, C, H, W] with the patches where mask [B, (H/p)*(W/p)] is True set to 0."""
    b, c, h, w = x.shape
    m = mask.reshape(b, 1, h // p, 1, w // p, 1).expand(b, c, h // p, p, w // p, p).reshape(b, c, h, w)
    return x.masked_fill(m, 0.0)


def reconstruction_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                        stroke_weight: float) -> torch.Tensor:
    """pred, target [B, N, C*p*p]; mask [B, N]. Stroke pixels and masked patches weigh more."""
    background = target.median(dim=-1, keepdim=True).values
    w = 1.0 + stroke_weight * ((target - background).abs() > 0.1).float()
    w = w * (1.0 + mask.float().unsqueeze(-1))
    return ((pred - target) ** 2 * w).mean()


def pixel_values(tok: Any, images: Sequence[Any]) -> torch.Tensor:
    """[N, 3, S, S]: the images through the model's own image processor (resize, scale to [-1, 1])."""
    processor = processor_of(tok)
    if processor is None:
        raise ModelError("tower pretraining needs a vision-language model's tokenizer (with .processor)")
    return processor.image_processor(list(images), return_tensors="pt")["pixel_values"]


def pretrain_tower(model: Any, tok: Any, images: Sequence[Any], cfg: TowerPretrainConfig, seed: int = 0,
                   on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train `model`'s vision tower in place on `images` (PIL); returns the loss per step."""
    if not images:
        raise ValueError("tower pretraining got no images")
    tower = model.model.vision_tower
    vcfg = tower.config
    p = vcfg.patch_size
    px = pixel_values(tok, images)  # [N, 3, S, S] float32, kept in memory: 37 MB for 3000 images at 32 px
    head = torch.nn.Linear(vcfg.hidden_size, 3 * p * p)  # per-patch pixel decoder, thrown away
    params = list(tower.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    warm = max(1, cfg.steps // 20)
    # linear warm-up, then cosine to 10% counted from step 0. Not optim.lr_factor("cosine"), whose cosine starts
    # after the warm-up: with it, seed 1's RL gain fell from +15.3 to +8.8 (docs/benchmarks.md "Vision")
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.55 + 0.45 * math.cos(math.pi * min(1.0, s / cfg.steps))))
    g = torch.Generator().manual_seed(seed)
    n_patches = (px.shape[-1] // p) ** 2
    tower.train()
    losses = []
    for step in range(cfg.steps):
        x = px[torch.randint(0, px.shape[0], (cfg.batch_size,), generator=g)]
        mask = torch.rand(x.shape[0], n_patches, generator=g) < cfg.mask_ratio  # [B, N]
        feats = tower(pixel_values=mask_patches(x, mask, p), output_hidden_states=True).hidden_states[FEATURE_LAYER]
        loss = reconstruction_loss(head(feats), to_patches(x, p), mask, cfg.stroke_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    tower.eval()
    return losses
