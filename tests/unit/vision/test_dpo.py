"""DPO on image tasks (train/vision_dpo.py + dpo.py): each test one property."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch

from posttrain.config import DPOConfig, TrainerConfig
from posttrain.errors import TaskFileError
from posttrain.train.dpo import load_pairs_jsonl, reference_logprobs, sequence_logprobs, train_dpo
from posttrain.train.vision_dpo import image_pairs, save_image_pairs

from .conftest import make_tasks


def _other(tasks):
    """rejected: another task's answer that differs from this one's"""
    answers = [t.oracle for t in tasks]
    return lambda t: next((a for a in answers if a != t.oracle), None)


def _pairs(tok, n=8):
    tasks = make_tasks("chart", n=n, seed=2)
    return image_pairs(tok, tasks, _other(tasks))


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


def test_a_pairs_file_with_image_attachments_loads_the_same_pairs(vlm, tmp_path):
    _, tok = vlm
    tasks = make_tasks("chart", n=6, seed=2)
    n = save_image_pairs(tasks, _other(tasks), tmp_path / "data" / "pairs.jsonl")
    assert n == 6 and len(list((tmp_path / "data").rglob("*.png"))) == 6  # images beside the JSONL
    loaded = load_pairs_jsonl(tmp_path / "data" / "pairs.jsonl", tok)
    direct, _ = image_pairs(tok, tasks, _other(tasks))
    assert [(p.prompt, p.chosen, p.rejected) for p in loaded] == [(p.prompt, p.chosen, p.rejected) for p in direct]
    assert all(torch.equal(a.images[0]["pixel_values"], b.images[0]["pixel_values"]) for a, b in zip(loaded, direct))


def test_a_missing_image_in_a_pairs_file_names_the_row(vlm, tmp_path):
    _, tok = vlm
    row = {"messages": [{"role": "user", "content": "Which bar is tallest?",
                         "attachments": [{"kind": "image", "sha256": "ab" * 32, "path": "images/gone.png"}]}],
           "chosen": "B", "rejected": "A"}
    (tmp_path / "pairs.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskFileError, match=r"pairs\.jsonl:1.*gone\.png.*not found"):
        load_pairs_jsonl(tmp_path / "pairs.jsonl", tok)


def test_image_pairs_for_a_text_only_model_name_the_row_and_the_model(tmp_path):
    from posttrain.models.tiny import build_tiny

    tasks = make_tasks("chart", n=2, seed=2)
    save_image_pairs(tasks, _other(tasks), tmp_path / "pairs.jsonl")
    with pytest.raises(TaskFileError, match=r"pairs\.jsonl:1 has 1 image attachment.*text-only"):
        load_pairs_jsonl(tmp_path / "pairs.jsonl", build_tiny()[1])


@pytest.mark.slow
def test_posttrain_dpo_recipe_trains_a_vlm_on_an_image_pairs_file(tmp_path):
    from posttrain.config import load_config
    from posttrain.models.vlm import load_vlm
    from posttrain.recipes.pipeline import run_recipe

    tasks = make_tasks("chart", n=24, seed=3)
    save_image_pairs(tasks, _other(tasks), tmp_path / "pairs.jsonl")
    cfg = load_config(None, ["model.vision={image_size: 32, patch_size: 8}", f"dpo.data={tmp_path / 'pairs.jsonl'}",
                             "dpo.steps=15", "dpo.batch_size=8", "dpo.lr=1e-3", "dpo.eval_every=15",
                             "dpo.eval_frac=0.25", "threads=1"])
    s = run_recipe("dpo", cfg, tmp_path / "run")
    assert s["n_pairs"] == 18 and s["eval_after"]["eval/loss"] < s["eval_before"]["eval/loss"]
    model, tok = load_vlm(tmp_path / "run" / "model")  # saved with its processor, loadable as a VLM
    assert model.config.vision_config is not None and tok.processor is not None


def test_dpo_from_an_image_run_is_refused_by_name(vlm, tmp_path, monkeypatch):
    import posttrain.train.dpo as dpo
    from posttrain.recipes.pipeline import run_recipe
    from posttrain.config import load_config
    from posttrain.errors import ConfigError

    tasks = make_tasks("chart", n=2, seed=2)
    from_run, _ = image_pairs(vlm[1], tasks, _other(tasks))  # what an image run's trajectories would give
    monkeypatch.setattr(dpo, "pairs_from_run", lambda run, gap: from_run)
    cfg = load_config(None, ["model.vision={image_size: 32, patch_size: 8}", f"dpo.from_run={tmp_path}", "threads=1"])
    with pytest.raises(ConfigError, match="holds image prompts.*dpo.data"):
        run_recipe("dpo", cfg, tmp_path / "run")
