"""The tiny VLM: real HF format, patch embeddings interleaved at the image placeholder."""

from __future__ import annotations

import torch

from posttrain.models.vlm import load_vlm, save_vlm
from posttrain.rollout.vision import encode_task_prompt

from .conftest import make_tasks


def test_save_load_round_trip_gives_identical_logits(vlm, tmp_path):
    model, tok = vlm
    vp = encode_task_prompt(tok, make_tasks("chart", n=1)[0])
    save_vlm(model, tok, tmp_path / "m")
    model2, tok2 = load_vlm(tmp_path / "m")
    ids = torch.tensor([vp.ids])
    with torch.no_grad():
        a = model(input_ids=ids, **vp.images[0]).logits
        b = model2(input_ids=ids, **encode_task_prompt(tok2, make_tasks("chart", n=1)[0]).images[0]).logits
    assert type(model2).__name__ == "LlavaForConditionalGeneration" and torch.equal(a, b)


def test_prompt_holds_one_token_per_patch(vlm):
    _, tok = vlm
    vp = encode_task_prompt(tok, make_tasks("drawing", n=1)[0])
    assert vp.ids.count(vp.image_token_id) == (32 // 8) ** 2
    assert tuple(vp.images[0]["pixel_values"].shape) == (1, 3, 32, 32)


def test_the_image_changes_the_text_model_output(vlm):
    model, tok = vlm
    a, b = make_tasks("chart", n=2)
    va, vb = encode_task_prompt(tok, a), encode_task_prompt(tok, b)
    ids = torch.tensor([va.ids])
    with torch.no_grad():
        la = model(input_ids=ids, **va.images[0]).logits[0, -1]
        lb = model(input_ids=ids, **vb.images[0]).logits[0, -1]  # same tokens, other pixels
    assert (la - lb).abs().max() > 1e-4
