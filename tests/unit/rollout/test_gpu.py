"""GPU-only: CUDA graphs + compiled sampling give the same greedy tokens as the CPU engine."""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from tests.unit.rollout.conftest import hf_logprobs, random_prompts

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _need_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def test_cuda_graph_greedy_matches_cpu(tiny):
    model, tok = tiny
    reqs = [GenRequest(p, SamplingParams(temperature=0, max_new_tokens=24)) for p in random_prompts(6, 3, 40, seed=1)]
    cpu = FastEngine(model, tok).generate(reqs)
    gpu = FastEngine(model, tok, device="cuda", cuda_graphs=True).generate(reqs)
    assert [o.token_ids for o in gpu] == [o.token_ids for o in cpu]


def test_cuda_fp32_logprobs_match_trainer(tiny):
    model, tok = tiny
    p = random_prompts(2, 5, 30, seed=2)
    outs = FastEngine(model, tok, device="cuda", cuda_graphs=True).generate(
        [GenRequest(x, SamplingParams(max_new_tokens=16, seed=1)) for x in p])
    for x, o in zip(p, outs):
        assert (hf_logprobs(model, x, o.token_ids) - torch.tensor(o.logprobs)).abs().max() < 1e-3
