"""Continuous batching: per-request params, stop strings, max tokens, deadlines."""

from __future__ import annotations

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from tests.unit.rollout.conftest import random_prompts


def _mixed_requests():
    prompts = random_prompts(7, 3, 30, seed=5)
    params = [SamplingParams(temperature=0.0, max_new_tokens=5), SamplingParams(temperature=1.0, max_new_tokens=30, seed=1),
              SamplingParams(temperature=0.7, top_k=5, max_new_tokens=12, seed=2, n=3),
              SamplingParams(temperature=1.3, top_p=0.8, max_new_tokens=20, seed=3),
              SamplingParams(temperature=0.0, max_new_tokens=33), SamplingParams(max_new_tokens=1, seed=4, n=2),
              SamplingParams(temperature=0.5, max_new_tokens=17, seed=5)]
    return [GenRequest(p, q, id=f"r{i}") for i, (p, q) in enumerate(zip(prompts, params))]


def test_small_batch_with_refills_gives_same_outputs_as_one_wide_batch(tiny):
    model, tok = tiny
    reqs = _mixed_requests()
    wide = FastEngine(model, tok, max_batch=64).generate(reqs)
    narrow_eng = FastEngine(model, tok, max_batch=2)
    narrow = narrow_eng.generate(reqs)
    assert [(o.request_id, o.index, o.token_ids) for o in narrow] == [(o.request_id, o.index, o.token_ids) for o in wide]
    assert narrow_eng.counters["decode_steps"] > 33  # sequences joined as others left


def test_max_new_tokens_bounds_each_request(tiny):
    model, tok = tiny
    reqs = _mixed_requests()
    outs = FastEngine(model, tok).generate(reqs)
    by_id = {r.id: r.params.max_new_tokens for r in reqs}
    for o in outs:
        assert len(o.token_ids) <= by_id[o.request_id]
        assert o.finish_reason == "stop" or len(o.token_ids) == by_id[o.request_id]


def test_stop_string_ends_generation_and_is_cut_from_text(tiny):
    model, tok = tiny
    prompt = random_prompts(1, 10, 10, seed=6)[0]
    free = FastEngine(model, tok).generate([GenRequest(prompt, SamplingParams(temperature=0, max_new_tokens=40))])[0]
    stop = free.text[5:7]
    out = FastEngine(model, tok).generate([GenRequest(prompt, SamplingParams(temperature=0, max_new_tokens=40,
                                                                             stop=(stop,)))])[0]
    assert out.finish_reason == "stop"
    assert stop not in out.text and free.text.startswith(out.text)
    assert len(out.token_ids) < len(free.token_ids)


def test_deadline_returns_partial_output_without_blocking_others(tiny, monkeypatch):
    """The engine's clock is driven by its own decode steps (10 ms each), so the deadline
    falls after exactly 5 steps whatever the machine's load: no wall-clock race."""
    import time
    import types

    import posttrain.rollout.engines.fast.engine as fast_mod

    model, tok = tiny
    eng = FastEngine(model, tok, max_model_len=256)
    monkeypatch.setattr(fast_mod, "time", types.SimpleNamespace(
        monotonic=lambda: eng.counters["decode_steps"] * 0.01, perf_counter=time.perf_counter))
    p = random_prompts(3, 5, 10, seed=7)
    reqs = [GenRequest(p[0], SamplingParams(max_new_tokens=200, seed=0), id="late", deadline_s=0.05),
            GenRequest(p[1], SamplingParams(max_new_tokens=20, seed=0), id="ok"),
            GenRequest(p[2], SamplingParams(max_new_tokens=20, seed=0), id="expired", deadline_s=0.0)]
    late, ok, expired = eng.generate(reqs)
    assert late.finish_reason == "deadline" and 0 < len(late.token_ids) < 200
    assert len(late.logprobs) == len(late.token_ids)
    assert ok.finish_reason in ("length", "stop") and expired.finish_reason == "deadline"
    assert expired.token_ids == ()


def test_static_shape_decode_path_matches_dynamic(tiny):
    """The CUDA-graph path (bucketed batch, full-capacity keys), run eagerly on CPU."""
    model, tok = tiny
    reqs = _mixed_requests()
    dyn = FastEngine(model, tok, max_batch=5).generate(reqs)
    eng = FastEngine(model, tok, max_batch=5, static_decode=True)
    stat = eng.generate(reqs)
    assert eng._static is not None and eng.lanes.n == 8
    assert [o.token_ids for o in stat] == [o.token_ids for o in dyn]
