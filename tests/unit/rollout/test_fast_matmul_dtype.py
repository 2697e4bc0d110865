"""`engine.args.matmul_dtype: bfloat16`: the weight matmuls in bf16 (AMX / AVX512-BF16 on CPU),
activations, KV, attention and sampling in fp32.

Stated bound: the sampled tokens' logprobs are no further from the fp32 trainer's recompute
than the same model's HF bf16 forward is, on every random-init config of test_fast_arch.py
(measured 0.005-0.11 against HF bf16's 0.007-0.18: the activations here stay fp32). On real
SmolLM2-135M weights `benchmarks/rollout_bench.py --smollm2` reports the measured gap.
"""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.errors import ConfigError
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.engines.fast.model import MATRICES
from posttrain.rollout.weight_sync import WeightSyncError, manifest
from tests.unit.rollout.conftest import hf_logprobs, random_prompts
from tests.unit.rollout.test_fast_arch import ARCHS, _build


@pytest.fixture(scope="module")
def models(tiny):
    return {w: _build(w, len(tiny[1])) for w in ARCHS}


def _sample(model, tok, prompts, **args):
    params = SamplingParams(temperature=1.0, max_new_tokens=16, n=2, seed=5)
    return FastEngine(model, tok, **args).generate([GenRequest(p, params) for p in prompts])


@pytest.mark.parametrize("which", ARCHS)
def test_bf16_matmul_logprobs_stay_within_the_bound_of_fp32(which, models, tiny):
    model, tok = models[which], tiny[1]
    prompts = random_prompts(3, 4, 30, seed=2)
    outs = _sample(model, tok, prompts, matmul_dtype="bfloat16")
    half = copy.deepcopy(model).to(torch.bfloat16)
    ours, hf_bf16 = [], []
    for i, o in enumerate(outs):
        ref = hf_logprobs(model, prompts[i // 2], o.token_ids)  # fp32
        ours.append((ref - torch.tensor(o.logprobs)).abs().max().item())
        hf_bf16.append((ref - hf_logprobs(half, prompts[i // 2], o.token_ids).float()).abs().max().item())
    assert 0 < max(ours) < max(hf_bf16)  # > 0: the matmuls did run in bf16


def test_the_weight_matrices_are_held_in_bf16_alone(models, tiny):
    """No fp32 copy of a matrix stays behind (the trainer holds the masters); the embedding and the
    norms stay fp32, and the tied LM head (the embedding) runs through its bf16 copy."""
    lm = FastEngine(models["llama_tied"], tiny[1], matmul_dtype="bfloat16").lm
    assert {lm.layers[0][k].dtype for k in MATRICES} == {torch.bfloat16}
    assert lm.embed.dtype == lm.layers[0]["in_norm"].dtype == torch.float32
    assert set(lm._mm) == {id(lm.lm_head)} and lm._mm[id(lm.lm_head)].dtype == torch.bfloat16
    assert all(v.dtype == torch.bfloat16 for k, v in lm.views.items() if k.endswith("_proj.weight"))


def test_an_untied_lm_head_is_held_in_bf16_alone(models, tiny):
    lm = FastEngine(models["mistral_sliding"], tiny[1], matmul_dtype="bfloat16").lm
    assert not lm.tied and lm.lm_head.dtype == torch.bfloat16 and not lm._mm


def test_the_bf16_matrices_are_the_fp32_weights_rounded(models, tiny):
    model = models["llama_tied"]
    lm = FastEngine(model, tiny[1], matmul_dtype="bfloat16").lm
    state = model.state_dict()
    for name, view in lm.views.items():
        assert torch.equal(view, state[name].to(view.dtype)), name


def test_a_weight_sync_refreshes_the_bf16_copies(models, tiny):
    """After load_weights the engine samples exactly what a fresh engine on the new weights does."""
    model, tok = models["qwen3"], tiny[1]
    other = _build("qwen3", len(tok))
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(-1.0)
    prompts = random_prompts(2, 4, 20, seed=3)
    eng = FastEngine(model, tok, matmul_dtype="bfloat16")
    eng.load_weights(other.state_dict(), version=1)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, n=2, seed=9)
    got = eng.generate([GenRequest(p, params) for p in prompts])
    ref = FastEngine(other, tok, matmul_dtype="bfloat16").generate([GenRequest(p, params) for p in prompts])
    assert [o.token_ids for o in got] == [o.token_ids for o in ref]
    assert [o.logprobs for o in got] == [o.logprobs for o in ref]


def test_an_unknown_matmul_dtype_is_refused_naming_the_setting(models, tiny):
    with pytest.raises(ConfigError, match="engine.args.matmul_dtype must be one of"):
        FastEngine(models["llama_tied"], tiny[1], matmul_dtype="bf16")


def test_a_sync_writes_the_bf16_matrices_in_place_and_only_the_changed_ones(models, tiny):
    """The matrices keep their memory across syncs (no new allocation each step), and a LoRA-like
    sync (attention only) copies the attention matrices alone and leaves the tied head's copy."""
    model, tok = models["llama_tied"], tiny[1]
    eng = FastEngine(copy.deepcopy(model), tok, matmul_dtype="bfloat16")
    lm = eng.lm
    ptrs = [lm.layers[i][k].data_ptr() for i in range(len(lm.layers)) for k in MATRICES]
    head = lm._mm[id(lm.lm_head)]
    sentinel = head[0, 0].item()
    head[0, 0] = 7.0  # a write no sync of an unchanged embedding may undo
    state = {k: (v * 1.5 if "self_attn" in k else v.clone()) for k, v in model.state_dict().items()}
    rep = eng.load_weights(state, version=1)
    assert [lm.layers[i][k].data_ptr() for i in range(len(lm.layers)) for k in MATRICES] == ptrs
    assert rep.changed and all("self_attn" in k for k in rep.changed)
    assert torch.equal(lm.views["model.layers.0.self_attn.q_proj.weight"],
                       state["model.layers.0.self_attn.q_proj.weight"].to(torch.bfloat16))
    assert head[0, 0].item() == 7.0 != sentinel


def test_a_sync_from_another_process_verifies_the_bf16_matrices(models, tiny):
    """A Ray worker's sync: the sender digests its fp32 tensors; the engine checks the bytes that
    arrived against them and that each matrix went in as their bf16 rounding."""
    model, tok = models["qwen3"], tiny[1]
    eng = FastEngine(copy.deepcopy(model), tok, matmul_dtype="bfloat16")
    state = {k: v * 1.25 for k, v in model.state_dict().items()}
    sent = manifest(state, version=2)
    eng.load_weights(state, version=2, manifest=sent)
    assert eng.weights_version == 2
    assert torch.equal(eng.lm.views["model.layers.1.mlp.down_proj.weight"],
                       state["model.layers.1.mlp.down_proj.weight"].to(torch.bfloat16))
    state["model.layers.1.mlp.down_proj.weight"][5, 7] += 1e-3  # flipped on the way
    with pytest.raises(WeightSyncError, match="down_proj"):
        eng.load_weights(state, version=3, manifest=manifest({k: v for k, v in state.items()}, version=3) | {
            "model.layers.1.mlp.down_proj.weight": sent["model.layers.1.mlp.down_proj.weight"]})
