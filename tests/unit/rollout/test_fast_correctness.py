"""fast is exactly right: greedy equals HF generate, logprobs equal the trainer's recomputation."""

from __future__ import annotations

import pytest

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from tests.unit.rollout.conftest import hf_greedy, hf_logprobs, random_prompts


@pytest.mark.parametrize("which", ["tiny", "qwen_gqa"])
def test_greedy_matches_hf_generate_mixed_lengths(which, request):
    model, tok = request.getfixturevalue(which)
    prompts = random_prompts(6, 3, 40, seed=1)
    ref = hf_greedy(model, tok, prompts, 24)
    outs = FastEngine(model, tok, max_batch=4).generate(
        [GenRequest(p, SamplingParams(temperature=0, max_new_tokens=24)) for p in prompts])
    assert [list(o.token_ids) for o in outs] == ref


@pytest.mark.parametrize("which", ["tiny", "qwen_gqa"])
def test_sampled_logprobs_match_trainer_recompute(which, request):
    model, tok = request.getfixturevalue(which)
    prompts = random_prompts(3, 4, 30, seed=2)
    params = SamplingParams(temperature=0.8, top_p=0.9, top_k=40, max_new_tokens=24, n=3, seed=5)
    outs = FastEngine(model, tok).generate([GenRequest(p, params) for p in prompts])
    worst = 0.0
    for i, o in enumerate(outs):
        ref = hf_logprobs(model, prompts[i // 3], o.token_ids)
        worst = max(worst, (ref - __import__("torch").tensor(o.logprobs)).abs().max().item())
    assert worst < 1e-4


def test_seeded_sampling_independent_of_batch_composition(tiny):
    model, tok = tiny
    prompts = random_prompts(5, 4, 30, seed=3)
    params = SamplingParams(temperature=1.0, max_new_tokens=16, seed=11, n=2)
    alone = FastEngine(model, tok).generate([GenRequest(prompts[0], params)])
    crowd = FastEngine(model, tok, max_batch=3).generate([GenRequest(p, params) for p in reversed(prompts)])
    assert [o.token_ids for o in alone] == [o.token_ids for o in crowd[-2:]]


def test_samples_of_a_group_differ(tiny):
    model, tok = tiny
    outs = FastEngine(model, tok).generate([GenRequest(random_prompts(1, 10, 10)[0],
                                                       SamplingParams(max_new_tokens=16, n=8, seed=0))])
    assert len({o.token_ids for o in outs}) > 1
