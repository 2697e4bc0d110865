"""fast's own forward equals the HF forward: Llama (tiny), Qwen2 (GQA, biases, untied)."""

from __future__ import annotations

import pytest
import torch

from posttrain.errors import ModelError
from posttrain.rollout.fast_model import FastLM


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
