"""rl.micro_tokens: auto, the default: the update's tokens at once follow the model's shape and
the machine's memory (train/update_memory.py); an int keeps its meaning."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from posttrain.config import RLConfig
from posttrain.train import update, update_memory
from posttrain.train.update_memory import activation_bytes_per_token, micro_token_limit

from tests.unit.train.test_micro_batches import batch, grads_after


def shaped(layers: int, hidden: int, inter: int, vocab: int, text: bool = False) -> SimpleNamespace:
    """A model object with only the config a real HF model has (no weights)."""
    cfg = SimpleNamespace(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=inter, vocab_size=vocab)
    return SimpleNamespace(config=SimpleNamespace(text_config=cfg) if text else cfg)


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    return model, tok.pad_token_id


def test_auto_is_the_default():
    assert RLConfig().micro_tokens == "auto"


def test_a_word_other_than_auto_is_refused():
    with pytest.raises(ValueError, match="micro_tokens"):
        RLConfig(micro_tokens="lots")


def test_an_int_keeps_its_meaning(tiny):
    assert micro_token_limit(tiny[0], 0) == 0 and micro_token_limit(tiny[0], 1024) == 1024


def test_auto_runs_the_tiny_models_update_in_one_pass(tiny):
    assert micro_token_limit(tiny[0], "auto") > 10_000


def test_auto_fits_a_smollm2_shaped_update_in_the_budget():
    smol = shaped(30, 576, 1536, 49_152)
    limit = micro_token_limit(smol, "auto")
    assert 0 < limit * activation_bytes_per_token(smol) <= update_memory.update_budget_bytes("cpu")
    assert limit < 2_000  # a 64-sample step of ~2,300 tokens is cut


def test_a_larger_vocabulary_gets_fewer_tokens():
    assert micro_token_limit(shaped(18, 640, 2048, 262_144), "auto") < micro_token_limit(shaped(18, 640, 2048, 32_000), "auto")


def test_a_multimodal_config_is_read_through_its_text_config():
    assert activation_bytes_per_token(shaped(18, 640, 2048, 262_144, text=True)) == \
        activation_bytes_per_token(shaped(18, 640, 2048, 262_144))


def test_an_unknown_shape_sets_no_limit():
    assert micro_token_limit(SimpleNamespace(config=SimpleNamespace()), "auto") == 0


def test_the_cpu_budget_is_at_most_1_gib():
    assert 0 < update_memory.update_budget_bytes("cpu") <= 1 << 30


def test_auto_cuts_the_update_and_keeps_its_gradient(tiny, monkeypatch):
    model, pad = tiny
    one, _ = grads_after(model, pad, batch(), micro_tokens=0)
    per = activation_bytes_per_token(model)
    monkeypatch.setattr(update_memory, "update_budget_bytes", lambda device="cpu": 30 * per)  # ~30 tokens
    cuts = []
    real = update.micro_batches
    monkeypatch.setattr(update, "micro_batches", lambda sub, n: cuts.append(n) or real(sub, n))
    auto, _ = grads_after(model, pad, batch(), micro_tokens="auto")
    assert cuts and all(n == 30 for n in cuts) and len(real(batch(), 30)) > 1
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-5) for a, b in zip(one, auto))
