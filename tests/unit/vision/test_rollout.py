"""Engines on image prompts: per-task errors for bad images and text-only models, never a crash."""

from __future__ import annotations

import asyncio
import dataclasses

from posttrain.rollout import make_engine
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.single_turn import rollout_single_turn
from posttrain.tasks.images import store_image
from posttrain.types import Attachment

from .conftest import make_tasks


def _rollout(model, tok, tasks, name="hf", n=2):
    eng = make_engine(name, model, tok)
    return asyncio.run(rollout_single_turn(eng, tok, tasks, SamplingParams(temperature=1.0, n=n, max_new_tokens=4, seed=0)))


def _with_attachment(task, att):
    m = task.prompt[0]
    return dataclasses.replace(task, id=task.id + "-bad", prompt=(dataclasses.replace(m, attachments=(att,)),))


def test_hf_engine_samples_image_tasks(vlm):
    model, tok = vlm
    trajs = _rollout(model, tok, make_tasks("ui", n=3))
    assert len(trajs) == 6 and all(t.error is None and t.turns[0].token_ids for t in trajs)


def test_corrupt_and_missing_images_fail_only_their_task(vlm):
    model, tok = vlm
    good = make_tasks("chart", n=2)
    corrupt = _with_attachment(good[0], store_image(b"garbage, not a png"))
    missing = _with_attachment(good[1], Attachment("image", "cd" * 32, "images/gone.png"))
    trajs = _rollout(model, tok, [corrupt, good[0], missing])
    errs = {t.task_id: t.error.message for t in trajs if t.error is not None}
    assert set(errs) == {corrupt.id, missing.id}
    assert "corrupt" in errs[corrupt.id] and "images/gone.png not found" in errs[missing.id]
    assert [t.group for t in trajs] == [0, 0, 1, 1, 2, 2]


def test_image_prompt_to_text_only_model_names_model_and_task():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    task = make_tasks("drawing", n=1)[0]
    (t, _) = _rollout(model, tok, [task])
    assert t.error is not None and task.id in t.error.message and "LlamaForCausalLM" in t.error.message
    assert "text-only" in t.error.message


def test_engines_reject_images_for_a_text_only_model(vlm):
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    req = GenRequest((5, 40, 41), SamplingParams(max_new_tokens=2), id="r1", images=({"pixel_values": None},))
    (hf,) = make_engine("hf", model, tok).generate([req])
    (fast,) = make_engine("fast", model, tok).generate([req])
    assert hf.finish_reason == "error" and "LlamaForCausalLM" in hf.error and "r1" in hf.error
    assert fast.finish_reason == "error" and "LlamaForCausalLM" in fast.error and "r1" in fast.error


def test_hf_engine_never_samples_the_image_placeholder(vlm):
    import copy

    import torch

    model, tok = vlm
    m = copy.deepcopy(model)
    image_id = tok.processor.image_token_id
    with torch.no_grad():  # tied embeddings: make <image> the most likely next token by far
        m.get_output_embeddings().weight[image_id] *= 50
    trajs = _rollout(m, tok, make_tasks("chart", n=2), n=4)
    assert all(image_id not in t.turns[0].token_ids for t in trajs) and all(t.turns[0].token_ids for t in trajs)
