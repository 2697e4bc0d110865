"""fast's own forward equals the HF forward: Llama (tiny), Qwen2 (GQA, biases, untied)."""

from __future__ import annotations

import pytest
import torch

from posttrain.errors import ModelError
from posttrain.rollout.engines.fast.model import FastLM


def _incremental_logits(model, ids: torch.Tensor, split: int) -> torch.Tensor:
    """Prefill ids[:, :split] then decode one token at a time through the lanes."""
    lm = FastLM.from_hf(model)
    B, T = ids.shape
    lanes = lm.new_lanes(B, T + 1)
    out = [lm.logits(lm.forward(ids[:, :split], torch.zeros(B, dtype=torch.long), lanes))]
    for t in range(split, T):
        out.append(lm.logits(lm.forward(ids[:, t:t + 1], torch.full((B,), t), lanes)))
    return torch.cat(out, 1)


@pytest.mark.parametrize("which", ["tiny", "qwen_gqa"])
def test_forward_matches_hf(which, request):
    model, _ = request.getfixturevalue(which)
    ids = torch.randint(11, 100, (3, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(ids).logits.float()
        got = _incremental_logits(model, ids, 10)
    assert (got - ref).abs().max().item() < 1e-4


def test_unsupported_architecture_is_rejected(tiny):
    model, _ = tiny
    model.config.model_type = "gpt2"
    try:
        with pytest.raises(ModelError, match="model_type"):
            FastLM.from_hf(model)
    finally:
        model.config.model_type = "llama"


def test_mistral_config_matches_hf():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(5)
    cfg = MistralConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=128, sliding_window=None)
    model = MistralForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (_incremental_logits(model, ids, 6) - model(ids).logits).abs().max().item() < 1e-4


def test_bf16_engine_from_fp32_model_tracks_hf_bf16(tiny):
    """The GPU dtype on CPU: fp32 weights cast to bf16; logits close to HF's bf16 forward."""
    model, _ = tiny
    m16 = type(model)(model.config).eval()
    m16.load_state_dict(model.state_dict())
    m16 = m16.to(torch.bfloat16)
    lm = FastLM.from_hf(model, dtype=torch.bfloat16)
    ids = torch.randint(11, 100, (2, 20), generator=torch.Generator().manual_seed(2))
    lanes = lm.new_lanes(2, 24)
    with torch.no_grad():
        got = lm.logits(lm.forward(ids, torch.zeros(2, dtype=torch.long), lanes))
        ref = m16(ids).logits.float()
    assert got.dtype == torch.float32 and (got.log_softmax(-1) - ref.log_softmax(-1)).abs().max() < 5e-2
