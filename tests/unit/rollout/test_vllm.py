"""The optional vllm backend: same protocol checks, skipped without CUDA and vllm."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from posttrain.rollout.engine import GenRequest, SamplingParams
from tests.unit.rollout.conftest import hf_logprobs, random_prompts

pytestmark = pytest.mark.gpu


@pytest.fixture
def vllm_engine(tiny, tmp_path):
    if not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None:
        pytest.skip("needs a CUDA GPU and the vllm extra")
    from posttrain.rollout.engines.vllm import VLLMEngine

    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    return VLLMEngine(model, tok, model_path=str(tmp_path), dtype="float32"), model


def test_vllm_logprobs_match_trainer(vllm_engine):
    eng, model = vllm_engine
    p = random_prompts(2, 5, 30, seed=2)
    outs = eng.generate([GenRequest(x, SamplingParams(max_new_tokens=16, seed=1)) for x in p])
    for x, o in zip(p, outs):
        assert (hf_logprobs(model, x, o.token_ids) - torch.tensor(o.logprobs)).abs().max() < 1e-3


def test_vllm_prompt_too_long_is_a_per_request_error(vllm_engine):
    eng, _ = vllm_engine
    a, b = eng.generate([GenRequest(tuple([20] * 300)), GenRequest((20, 21))])
    assert a.finish_reason == "error" and b.finish_reason != "error"
