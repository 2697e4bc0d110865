"""Paged prefix store: a group prefills once, later calls and conversation turns reuse KV."""

from __future__ import annotations

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.engines.fast.kv_cache import PagedStore
from tests.unit.rollout.conftest import random_prompts


def test_group_prefills_its_prompt_once(tiny):
    model, tok = tiny
    prompt = random_prompts(1, 40, 40, seed=8)[0]
    eng = FastEngine(model, tok)
    eng.generate([GenRequest(prompt, SamplingParams(max_new_tokens=4, n=8))])
    st = eng.stats()
    assert st["prefill_computed_tokens"] == 40 and st["prompt_tokens"] == 320
    assert abs(st["prefix_cache_hit_rate"] - 7 / 8) < 1e-9


def test_repeated_prompt_hits_stored_blocks_with_identical_output(tiny):
    model, tok = tiny
    prompt = random_prompts(1, 40, 40, seed=9)[0]
    eng = FastEngine(model, tok, block_size=8)
    req = GenRequest(prompt, SamplingParams(temperature=0, max_new_tokens=10))
    first = eng.generate([req])[0]
    before = eng.prefill_stats.computed_tokens
    second = eng.generate([req])[0]
    assert eng.prefill_stats.computed_tokens - before == 8  # 4 full blocks served, the tail recomputed
    assert second.token_ids == first.token_ids
    # Not bitwise: the served blocks leave an 8-row tail GEMM where the first call ran 40 rows, and
    # oneDNN picks its blocking (so the summation order) by shape and CPU (seen: 2.4e-7 on AVX-512/AMX).
    assert max(abs(a - b) for a, b in zip(second.logprobs, first.logprobs)) < 1e-5


def test_conversation_turn_prefills_only_new_tokens_and_matches_fresh_encoding(tiny):
    model, tok = tiny
    p = random_prompts(3, 20, 20, seed=10)
    params = SamplingParams(temperature=0, max_new_tokens=12)
    eng = FastEngine(model, tok, block_size=4)
    with eng.conversation(p[0]) as conv:
        conv.generate(params)
        conv.append(p[1])
        history = len(conv.ids)
        before = conv.prefilled_tokens
        reply = conv.generate(params)
        # only the appended tokens plus the previous turn's partial last block are recomputed
        assert conv.prefilled_tokens - before <= len(p[1]) + 4 < history
        fresh = FastEngine(model, tok).generate([GenRequest(tuple(conv.ids[:history]), params)])[0]
        assert reply.token_ids == fresh.token_ids


def test_pinned_blocks_survive_eviction_pressure(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok, block_size=4, cache_mb=0.05)  # a few dozen blocks
    conv = eng.conversation(random_prompts(1, 24, 24, seed=11)[0])
    conv.generate(SamplingParams(temperature=0, max_new_tokens=8))
    pinned = list(conv._pinned)
    eng.generate([GenRequest(p, SamplingParams(max_new_tokens=30)) for p in random_prompts(20, 30, 40, seed=12)])
    assert eng.store.stats.evicted_blocks > 0
    assert eng.store.lookup(conv.ids, len(conv.ids), count=False)[: len(pinned)] == pinned


def test_store_evicts_least_recently_used_unpinned_block():
    import torch

    st = PagedStore(1, 1, 2, num_blocks=2, block_size=2, dtype=torch.float32, device=torch.device("cpu"))
    lane = [torch.randn(1, 1, 8, 2)]
    st.insert([1, 2], lane, lane, 0)
    st.insert([3, 4], lane, lane, 0)
    st.lookup([1, 2], 2)  # touch: [3, 4] is now the oldest
    st.insert([5, 6], lane, lane, 0)
    assert st.lookup([1, 2], 2) and not st.lookup([3, 4], 2) and st.lookup([5, 6], 2)
