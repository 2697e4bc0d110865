"""Self-supervised tower pretraining: patch order, masking, the stroke weighting, and that it
trains the tower alone on pixels (tower_pretrain.py); the quickstart's base model uses it."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from posttrain.config import TowerPretrainConfig
from posttrain.errors import ConfigError, ModelError
from posttrain.tasks.images import open_image, task_images
from posttrain.train.tower_pretrain import mask_patches, pretrain_tower, reconstruction_loss, to_patches

from .conftest import make_tasks


def test_patches_follow_the_towers_token_order(vlm):
    model, _ = vlm
    conv = model.model.vision_tower.embeddings.patch_embedding  # Conv2d(3, D, p, stride p)
    x = torch.randn(2, 3, 32, 32)
    tokens = conv(x).flatten(2).transpose(1, 2)  # [B, N, D]: the tower's own patch order
    w = conv.weight.reshape(conv.weight.shape[0], -1)  # [D, 3*p*p], flattened like to_patches
    assert torch.allclose(to_patches(x, 8) @ w.T + conv.bias, tokens, atol=1e-5)


def test_mask_zeroes_exactly_the_masked_patches():
    x = torch.ones(1, 3, 16, 16)
    mask = torch.tensor([[True, False, False, True]])
    out = to_patches(mask_patches(x, mask, 8), 8)  # [1, 4, 192]
    assert out[0, 0].abs().sum() == 0 and out[0, 3].abs().sum() == 0
    assert torch.all(out[0, 1] == 1) and torch.all(out[0, 2] == 1)


def test_an_error_on_a_stroke_pixel_costs_more_than_on_the_background():
    target = torch.full((1, 1, 64), 1.0)  # a white patch ...
    target[0, 0, :4] = -1.0  # ... with a 4-pixel stroke
    on_stroke, on_background = target.clone(), target.clone()
    on_stroke[0, 0, 0] = 0.0
    on_background[0, 0, 10] = 0.0
    unmasked = torch.zeros(1, 1, dtype=torch.bool)
    assert reconstruction_loss(on_stroke, target, unmasked, 4.0) == 5 * reconstruction_loss(on_background, target, unmasked, 4.0)
    assert reconstruction_loss(on_background, target, unmasked ^ True, 4.0) == 2 * reconstruction_loss(on_background, target, unmasked, 4.0)


def test_pretraining_lowers_the_loss_and_touches_only_the_tower(vlm):
    model, tok = copy.deepcopy(vlm[0]), vlm[1]
    text_before = {k: v.clone() for k, v in model.model.language_model.state_dict().items()}
    tower_before = {k: v.clone() for k, v in model.model.vision_tower.state_dict().items()}
    images = [open_image(a) for t in make_tasks("chart", 24) + make_tasks("drawing", 24) for a in task_images(t)]
    losses = pretrain_tower(model, tok, images, TowerPretrainConfig(steps=40, batch_size=16, lr=3e-3), seed=0)
    assert len(losses) == 40 and sum(losses[-5:]) < 0.5 * sum(losses[:5])
    assert all(torch.equal(v, model.model.language_model.state_dict()[k]) for k, v in text_before.items())
    assert any(not torch.equal(v, model.model.vision_tower.state_dict()[k]) for k, v in tower_before.items())


def test_a_text_only_tokenizer_is_refused_by_name(vlm):
    from posttrain.models.tiny import build_tokenizer

    with pytest.raises(ModelError, match="vision-language"):
        pretrain_tower(vlm[0], build_tokenizer(), [object()], TowerPretrainConfig(steps=1))


def test_a_mask_ratio_of_one_is_a_config_error_naming_the_key():
    from posttrain.recipes.vision import vision_config

    with pytest.raises(ConfigError, match="mask_ratio"):
        vision_config(None, ["model.vision.pretrain.mask_ratio=1.0"])


def test_the_quickstart_base_model_pretrains_on_train_images_and_skips_bad_ones(tmp_path):
    import dataclasses

    from posttrain.recipes.vision import build_base_vlm, vision_config
    from posttrain.types import Attachment

    cfg = vision_config(None, ["model.vision.pretrain.steps=3", "model.vision.pretrain.batch_size=4"])
    tasks = make_tasks("ui", 4)
    broken = Attachment(kind="image", sha256="0" * 64, path="missing.png")
    last = tasks[0].prompt[-1]
    tasks[0] = dataclasses.replace(tasks[0], prompt=(*tasks[0].prompt[:-1], dataclasses.replace(last, attachments=(broken,))))
    seen = []
    build_base_vlm(cfg, tmp_path, tasks, lambda phase, info: seen.append(phase))
    log = json.loads((tmp_path / "tower_losses.json").read_text())
    assert (len(log["losses"]), log["images"], log["skipped_images"]) == (3, 3, 1)
    assert seen == ["tower"] * 3 and (tmp_path / "base-model" / "config.json").is_file()
