"""DPO on image tasks (train/vision_dpo.py + dpo.py): each test one property."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from posttrain.config import DPOConfig, TrainerConfig
from posttrain.errors import TaskFileError
from posttrain.train.dpo import reference_logprobs, sequence_logprobs, train_dpo
from posttrain.train.vision_dpo import image_pairs

from .conftest import make_tasks


def _pairs(tok, n=8):
    tasks = make_tasks("chart", n=n, seed=2)
    answers = [t.oracle for t in tasks]
    # rejected: another task's answer that differs from this one's
    return image_pairs(tok, tasks, lambda t: next((a for a in answers if a != t.oracle), None))


def test_pairs_carry_the_tasks_images(vlm):
    _, tok = vlm
    pairs, errors = _pairs(tok)
    assert pairs and not errors and all(p.images and "pixel_values" in p.images[0] for p in pairs)
    assert all(p.chosen != p.rejected for p in pairs)


def test_logprobs_depend_on_the_pixels(vlm):
    model, tok = vlm
    pairs = _pairs(tok)[0][:2]
    blank = [dataclasses.replace(p, images=({"pixel_values": torch.zeros_like(p.images[0]["pixel_values"])},))
             for p in pairs]
    with torch.no_grad():
        a = sequence_logprobs(model, pairs, tok.pad_token_id, 512)[0]
        b = sequence_logprobs(model, blank, tok.pad_token_id, 512)[0]
    assert (a - b).abs().max() > 1e-4


def test_dpo_on_image_pairs_prefers_the_oracle_and_trains_the_tower(vlm):
    model, tok = vlm
    m = copy.deepcopy(model)
    pairs, _ = _pairs(tok)
    ref = reference_logprobs(m, pairs, tok.pad_token_id, 512)
    tower = [p.detach().clone() for p in m.model.vision_tower.parameters()]
    cfg = DPOConfig(steps=12, lr=1e-3, batch_size=8, max_len=512, warmup_steps=1)
    hist = train_dpo(m, pairs, ref, cfg, TrainerConfig(), tok.pad_token_id)
    assert hist[-1]["loss"] < hist[0]["loss"] and hist[-1]["accuracy"] > 0.5
    assert any(not torch.equal(a, b) for a, b in zip(tower, m.model.vision_tower.parameters()))


def test_an_image_pair_longer_than_max_len_is_named_not_truncated(vlm):
    model, tok = vlm
    pairs = _pairs(tok)[0][:1]
    with pytest.raises(TaskFileError, match="cannot be truncated"):
        sequence_logprobs(model, pairs, tok.pad_token_id, 8)
