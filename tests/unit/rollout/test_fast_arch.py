"""fast runs real architectures exactly: Llama (tied), Qwen2 (biases, sliding layers), Qwen3
(q/k norms), Gemma 3 (sandwich norms, GELU, scaled embeddings, sliding + global layers with
their own rope, query scale, softcapping) and Mistral (sliding window), each a random-init
SMALL config whose sliding window (8) is shorter than the prompts, so both layer kinds matter.

Tolerances: logits and logprobs within 1e-4 of HF in fp32; greedy tokens equal to HF generate.
"""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.engines.fast.model import FastLM
from tests.unit.rollout.conftest import hf_greedy, hf_logprobs, random_prompts

WINDOW = 8
ARCHS = ["llama_tied", "qwen2_sliding", "qwen3", "gemma3", "mistral_sliding", "llama_yarn"]


def _build(which: str, vocab: int):
    import transformers as tf

    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2,
                  pad_token_id=0, bos_token_id=1, eos_token_id=3)  # the tiny tokenizer's ids
    if which == "llama_tied":
        cfg = tf.LlamaConfig(num_hidden_layers=2, tie_word_embeddings=True, **common)
        cls = tf.LlamaForCausalLM
    elif which == "llama_yarn":
        cfg = tf.LlamaConfig(num_hidden_layers=2, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                                "original_max_position_embeddings": 64}, **common)
        cls = tf.LlamaForCausalLM
    elif which == "qwen2_sliding":  # layer 0 global, layers 1-2 sliding (max_window_layers=1)
        cfg = tf.Qwen2Config(num_hidden_layers=3, use_sliding_window=True, sliding_window=WINDOW,
                             max_window_layers=1, rope_theta=5000.0, **common)
        cls = tf.Qwen2ForCausalLM
    elif which == "qwen3":
        cfg = tf.Qwen3Config(num_hidden_layers=3, head_dim=32, use_sliding_window=True, sliding_window=WINDOW,
                             max_window_layers=2, tie_word_embeddings=True, **common)
        cls = tf.Qwen3ForCausalLM
    elif which == "gemma3":  # sliding, global, sliding, sliding: local and global rope bases differ
        cfg = tf.Gemma3TextConfig(num_hidden_layers=4, head_dim=16, sliding_window=WINDOW,
                                  layer_types=["sliding_attention", "full_attention", "sliding_attention",
                                               "sliding_attention"],
                                  rope_theta=1_000_000.0, rope_local_base_freq=100.0, query_pre_attn_scalar=24,
                                  final_logit_softcapping=3.0, **common)
        cls = tf.Gemma3ForCausalLM
    elif which == "mistral_sliding":
        cfg = tf.MistralConfig(num_hidden_layers=2, sliding_window=WINDOW, **common)
        cls = tf.MistralForCausalLM
    else:
        raise ValueError(which)
    torch.manual_seed(7)
    model = cls(cfg).eval()
    with torch.no_grad():  # random init leaves norms at 1 (Gemma: 0) and biases at 0: make them matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
            elif name.endswith("bias"):
                p.normal_(0, 0.5)
        if which == "gemma3":  # x sqrt(hidden) embeddings swamp a random model's layers: it repeats its input
            model.model.embed_tokens.weight.mul_(0.125)
    return model


@pytest.fixture(scope="module")
def models(tiny):
    _, tok = tiny
    return {w: _build(w, len(tok)) for w in ARCHS}


def _incremental_logits(lm: FastLM, ids: torch.Tensor, split: int) -> torch.Tensor:
    """Prefill ids[:, :split] (matmul path), then decode one token at a time (fused kernel on CPU)."""
    B, T = ids.shape
    lanes = lm.new_lanes(B, T + 1)
    out = [lm.logits(lm.forward(ids[:, :split], torch.zeros(B, dtype=torch.long), lanes))]
    for t in range(split, T):
        out.append(lm.logits(lm.forward(ids[:, t:t + 1], torch.full((B,), t), lanes)))
    return torch.cat(out, 1)


@pytest.mark.parametrize("fused", [True, False], ids=["kernel", "tensor"])
@pytest.mark.parametrize("which", ARCHS)
def test_forward_matches_hf_past_the_window(which, fused, models):
    model = models[which]
    ids = torch.randint(11, 108, (3, 40), generator=torch.Generator().manual_seed(0))
    lm = FastLM.from_hf(model)
    lm.fused_decode = fused
    with torch.no_grad():
        ref = model(ids).logits.float()
        got = _incremental_logits(lm, ids, 12)  # prefill already longer than the window
    assert (got - ref).abs().max().item() < 1e-4


@pytest.mark.parametrize("max_batch", [1, 6])
@pytest.mark.parametrize("which", ARCHS)
def test_greedy_matches_hf_generate(which, max_batch, models, tiny):
    model, tok = models[which], tiny[1]
    prompts = random_prompts(6, 3, 30, seed=1)  # most longer than the window
    ref = hf_greedy(model, tok, prompts, 20)
    outs = FastEngine(model, tok, max_batch=max_batch).generate(
        [GenRequest(p, SamplingParams(temperature=0, max_new_tokens=20)) for p in prompts])
    assert [list(o.token_ids) for o in outs] == ref


@pytest.mark.parametrize("which", ARCHS)
def test_sampled_logprobs_match_trainer_recompute(which, models, tiny):
    model, tok = models[which], tiny[1]
    prompts = random_prompts(3, 4, 30, seed=2)
    params = SamplingParams(temperature=1.0, max_new_tokens=20, n=2, seed=5)
    outs = FastEngine(model, tok).generate([GenRequest(p, params) for p in prompts])
    worst = max((hf_logprobs(model, prompts[i // 2], o.token_ids) - torch.tensor(o.logprobs)).abs().max().item()
                for i, o in enumerate(outs))
    assert worst < 1e-4


def test_gemma_layers_get_their_own_rope_tables(models):
    lm = FastLM.from_hf(models["gemma3"])
    (lc, _), (gc, _) = lm.ropes["sliding_attention"], lm.ropes["full_attention"]
    assert lm.arch.windows == (WINDOW, None, WINDOW, WINDOW) and not torch.allclose(lc[5], gc[5])


def test_weight_sync_reaches_gemma_norms(models, tiny):
    """A Gemma checkpoint's every tensor maps onto the engine: a sync of perturbed weights changes
    the output exactly as HF's does."""
    model, tok = models["gemma3"], tiny[1]
    eng = FastEngine(model, tok)
    other = _build("gemma3", len(tok))
    with torch.no_grad():
        for name, p in other.named_parameters():
            if "feedforward_layernorm" in name or "q_norm" in name:
                p.mul_(-1)
    eng.load_weights(other.state_dict(), version=1)
    prompt = random_prompts(1, 20, 20, seed=4)[0]
    out = eng.generate([GenRequest(prompt, SamplingParams(temperature=0, max_new_tokens=12))])[0]
    assert list(out.token_ids) == hf_greedy(other, tok, [prompt], 12)[0]


_REAL = [p for p in __import__("os").environ.get("POSTTRAIN_REAL_MODELS", "").split(":") if p]


@pytest.mark.skipif(not _REAL, reason="set POSTTRAIN_REAL_MODELS=dir[:dir...] (HF checkpoints) to run")
@pytest.mark.parametrize("path", _REAL)
def test_real_checkpoint_greedy_and_logprobs_match_hf(path):
    """Real weights (SmolLM2, Qwen3, Gemma 3 ...): greedy equals HF generate; logprobs within 1e-4."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token_id = tok.eos_token_id
    prompts = [tuple(tok.encode(t)) for t in ("The capital of France is", "def fibonacci(n):\n   ",
                                              "Water boils at a temperature of 100 degrees")]
    outs = FastEngine(model, tok).generate([GenRequest(p, SamplingParams(temperature=0, max_new_tokens=16))
                                            for p in prompts])
    ref = hf_greedy(model, tok, prompts, 16)
    assert [list(o.token_ids) for o in outs] == ref
    worst = max((hf_logprobs(model, p, o.token_ids) - torch.tensor(o.logprobs)).abs().max().item()
                for p, o in zip(prompts, outs))
    assert worst < 1e-4
