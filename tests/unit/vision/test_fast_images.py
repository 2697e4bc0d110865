"""The `fast` engine on image prompts (tiny LLaVA): each test one property."""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.errors import ConfigError
from posttrain.rollout import make_engine
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.vision import encode_task_prompt

from .conftest import make_tasks


def _requests(tok, tasks, params):
    out = []
    for t in tasks:
        vp = encode_task_prompt(tok, t)
        assert not vp.error
        out.append(GenRequest(vp.ids, params, id=t.id, images=vp.images))
    return out


def test_greedy_equals_hf_on_every_image_domain(vlm):
    model, tok = vlm
    tasks = make_tasks("chart", n=2) + make_tasks("ui", n=2) + make_tasks("drawing", n=2)
    reqs = _requests(tok, tasks, SamplingParams(temperature=0, max_new_tokens=12))
    hf = make_engine("hf", model, tok).generate(reqs)
    fast = make_engine("fast", model, tok).generate(reqs)
    assert [o.token_ids for o in fast] == [o.token_ids for o in hf] and all(o.token_ids for o in fast)


def test_sampled_logprobs_match_the_vlm_forward(vlm):
    model, tok = vlm
    (req,) = _requests(tok, make_tasks("chart", n=1), SamplingParams(temperature=1.0, n=4, max_new_tokens=10, seed=3))
    worst = 0.0
    for o in make_engine("fast", model, tok).generate([req]):
        ids = torch.tensor([list(req.prompt_ids) + list(o.token_ids)])
        with torch.no_grad():
            logits = model(input_ids=ids, **req.images[0]).logits[0, len(req.prompt_ids) - 1:-1].float()
        ref = logits.log_softmax(-1).gather(-1, torch.tensor(o.token_ids)[:, None])[:, 0]
        worst = max(worst, (ref - torch.tensor(o.logprobs)).abs().max().item())
    assert worst < 1e-4


def test_a_group_prefills_its_image_prompt_once(vlm):
    model, tok = vlm
    (req,) = _requests(tok, make_tasks("ui", n=1), SamplingParams(temperature=1.0, n=4, max_new_tokens=3, seed=0))
    eng = make_engine("fast", model, tok)
    eng.generate([req])
    st = eng.stats()
    assert st["prefill_computed_tokens"] == len(req.prompt_ids) and abs(st["prefix_cache_hit_rate"] - 3 / 4) < 1e-9


def test_same_ids_with_another_image_are_not_served_from_the_store(vlm):
    model, tok = vlm
    a, b = make_tasks("chart", n=2, seed=5)
    ra, rb = _requests(tok, [a, b], SamplingParams(temperature=0, max_new_tokens=10))
    rb = GenRequest(ra.prompt_ids, rb.params, id="b-pixels-a-ids", images=rb.images)  # a's ids, b's pixels
    eng = make_engine("fast", model, tok)
    eng.generate([ra])
    (out,) = eng.generate([rb])
    (want,) = make_engine("hf", model, tok).generate([rb])
    assert out.token_ids == want.token_ids and eng.stats()["store_block_hit_rate"] == 0.0


def test_weight_sync_carries_the_vision_tower(vlm):
    model, tok = vlm
    reqs = _requests(tok, make_tasks("drawing", n=3), SamplingParams(temperature=0, max_new_tokens=10))
    eng = make_engine("fast", model, tok)
    before = eng.generate(reqs)
    changed = copy.deepcopy(model)
    with torch.no_grad():
        for p in changed.model.vision_tower.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.5)
    eng.load_weights(changed.state_dict(), version=1)
    after = eng.generate(reqs)
    want = make_engine("hf", changed, tok).generate(reqs)
    assert [o.token_ids for o in after] == [o.token_ids for o in want]
    moved = max(abs(x - y) for a, b in zip(after, before) for x, y in zip(a.logprobs, b.logprobs))
    assert moved > 1e-3  # the new tower's features reached the prompt
    assert max(abs(x - y) for a, b in zip(after, want) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


def test_placeholder_count_mismatch_fails_only_its_request(vlm):
    model, tok = vlm
    good, other = _requests(tok, make_tasks("chart", n=2), SamplingParams(temperature=0, max_new_tokens=4))
    image_id = tok.processor.image_token_id
    cut = list(good.prompt_ids)
    cut.remove(image_id)
    bad = GenRequest(tuple(cut), good.params, id="bad", images=good.images)
    outs = make_engine("fast", model, tok).generate([bad, other])
    assert outs[0].finish_reason == "error" and "bad" in outs[0].error and "placeholder" in outs[0].error
    assert outs[1].finish_reason != "error" and outs[1].token_ids


def test_speculation_with_a_vlm_is_refused_at_start(vlm):
    model, tok = vlm
    with pytest.raises(ConfigError, match="vision-language"):
        make_engine("fast", model, tok, speculative="ngram")
