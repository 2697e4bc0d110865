"""Shared fixtures: the tiny default model (Llama, character tokenizer) and a GQA Qwen2."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every rollout test on one intra-op thread (tests/conftest.py)."""


@pytest.fixture(scope="session")
def tiny():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    return model.eval(), tok


@pytest.fixture(scope="session")
def qwen_gqa(tiny):
    """Qwen2-style: q/k/v biases, 2 KV heads for 4 query heads, untied head, rope_theta."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    _, tok = tiny
    torch.manual_seed(3)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      rope_theta=5000.0, rms_norm_eps=1e-6, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():  # random-init biases are zero; make them matter
        for layer in model.model.layers:
            for p in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                p.bias.normal_(0, 0.5)
    return model, tok


def random_prompts(n: int, lo: int, hi: int, seed: int = 0, vocab: int = 108) -> list[tuple[int, ...]]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
    return [tuple(torch.randint(11, vocab, (L,), generator=g).tolist()) for L in lens]


def hf_logprobs(model, prompt, completion) -> torch.Tensor:
    """The trainer's recomputation: one HF forward of the full sequence, fp32 log_softmax."""
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        lp = model(ids).logits.float().log_softmax(-1)[0, len(prompt) - 1:-1]  # [T, V]
    return lp.gather(-1, torch.tensor(completion)[:, None])[:, 0]


def hf_greedy(model, tok, prompts, max_new: int) -> list[list[int]]:
    """transformers `generate`, greedy, left-padded batch; cut after the first EOS."""
    W = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (W - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (W - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=max_new,
                             pad_token_id=pad, eos_token_id=tok.eos_token_id)
    rows = []
    for r in out[:, W:].tolist():
        rows.append(r[: r.index(tok.eos_token_id) + 1] if tok.eos_token_id in r else r)
    return rows
