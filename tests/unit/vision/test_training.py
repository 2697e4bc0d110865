"""SFT and RL on image tasks: image tokens out of the loss, engine and trainer logprobs agree."""

from __future__ import annotations

import asyncio
import copy

import torch

from posttrain.config import RLConfig, SFTConfig
from posttrain.rollout import make_engine
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.single_turn import rollout_single_turn
from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.update import update_policy
from posttrain.train.vision_sft import vision_sft_train

from .conftest import make_tasks


def _trajs(model, tok, n_tasks=4, n=2):
    eng = make_engine("hf", model, tok)
    tasks = make_tasks("chart", n=n_tasks)
    return asyncio.run(rollout_single_turn(eng, tok, tasks, SamplingParams(temperature=1.0, n=n, max_new_tokens=4, seed=1)))


def test_image_tokens_are_masked_and_pixels_are_batched(vlm):
    model, tok = vlm
    tb = pack_trajectories(_trajs(model, tok), tok.pad_token_id)
    image_id = tok.processor.image_token_id
    assert (tb.input_ids == image_id).sum() == 8 * 16
    assert tb.loss_mask[tb.input_ids[:, 1:] == image_id].sum() == 0 and tb.loss_mask.sum() > 0
    assert tuple(tb.model_inputs["pixel_values"].shape) == (8, 3, 32, 32)


def test_trainer_recomputes_engine_logprobs(vlm):
    model, tok = vlm
    tb = pack_trajectories(_trajs(model, tok), tok.pad_token_id)
    with torch.no_grad():
        logp, _ = token_logprobs(model, tb.input_ids, tb.attention_mask, **tb.model_inputs)
    assert ((logp - tb.old_logp).abs() * tb.loss_mask).max() < 1e-4


def test_rl_update_runs_on_image_trajectories(vlm):
    model, tok = vlm
    m = copy.deepcopy(model)
    trajs = _trajs(m, tok)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    stats = update_policy(m, opt, trajs, torch.linspace(-1, 1, len(trajs)), RLConfig(max_new_tokens=4), tok.pad_token_id)
    before = dict(model.named_parameters())["model.vision_tower.embeddings.patch_embedding.weight"]
    after = dict(m.named_parameters())["model.vision_tower.embeddings.patch_embedding.weight"]
    assert stats["grad_norm"] > 0 and not torch.equal(before, after)  # the gradient reaches the vision tower


def test_vision_sft_lowers_the_loss(vlm):
    model, tok = vlm
    m = copy.deepcopy(model)
    losses, errors = vision_sft_train(m, tok, make_tasks("drawing", n=16), SFTConfig(steps=12, batch_size=8, lr=3e-3,
                                                                                    warmup_steps=1))
    assert not errors and sum(losses[-3:]) / 3 < losses[0]
