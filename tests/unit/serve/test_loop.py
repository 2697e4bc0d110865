"""The engine loop: requests join a running batch, and its outputs equal `engine.generate`'s."""

from __future__ import annotations

import threading

import pytest

from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.serve.loop import EngineLoop


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    return model.eval(), tok


def _collect(loop, reqs):
    """Submit `reqs` one by one; {index: Completion} once all are done."""
    done, ev = {}, threading.Event()

    def sink_for(i):
        def sink(e):
            if e[0] == "done":
                done[i] = e[2]
                if len(done) == len(reqs):
                    ev.set()
        return sink

    handles = [loop.submit(r, sink_for(i)) for i, r in enumerate(reqs)]
    return done, ev, handles


def _requests(n, max_new=24):
    return [GenRequest(tuple(range(12, 20 + 3 * i)), SamplingParams(temperature=0.0, max_new_tokens=max_new + i))
            for i in range(n)]


@pytest.mark.parametrize("speculative", [None, "ngram"])
def test_loop_outputs_equal_direct_generation(tiny, speculative):
    model, tok = tiny
    reqs = _requests(4, 12)
    want = FastEngine(model, tok).generate(reqs)
    loop = EngineLoop(FastEngine(model, tok, max_batch=8, speculative=speculative)).start()
    try:
        done, ev, _ = _collect(loop, reqs)
        assert ev.wait(120)
    finally:
        loop.stop()
    assert [done[i].token_ids for i in range(4)] == [c.token_ids for c in want]


def test_a_request_joins_a_running_batch(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok, max_batch=8, ignore_eos=True)
    loop = EngineLoop(eng).start()
    seen = []
    first = threading.Event()
    try:
        def sink(e):
            if e[0] == "tokens":
                seen.append(len(eng.active))
                first.set()
        loop.submit(GenRequest((12, 13, 14), SamplingParams(temperature=0.0, max_new_tokens=150)), sink)
        assert first.wait(60)
        done, ev, _ = _collect(loop, _requests(2, 8))
        assert ev.wait(120)
    finally:
        loop.stop()
    assert max(seen) >= 2  # the long request decoded together with the late ones


def test_cancel_frees_the_lane(tiny):
    model, tok = tiny
    loop = EngineLoop(FastEngine(model, tok, max_batch=2, ignore_eos=True)).start()
    try:
        done, ev, (h,) = _collect(loop, [GenRequest((12, 13), SamplingParams(max_new_tokens=200))])
        loop.cancel(h)
        assert ev.wait(60)
    finally:
        loop.stop()
    assert done[0].finish_reason in ("deadline", "length") and len(done[0].token_ids) < 200


def test_a_request_longer_than_the_lanes_grows_them_and_matches(tiny):
    model, tok = tiny
    reqs = [GenRequest(tuple(range(12, 40)), SamplingParams(temperature=0.0, max_new_tokens=40)),
            GenRequest((12, 13, 14), SamplingParams(temperature=0.0, max_new_tokens=4))]
    want = FastEngine(model, tok).generate(reqs)
    loop = EngineLoop(FastEngine(model, tok, max_batch=4), lanes=1, lane_len=16).start()
    try:
        done, ev, _ = _collect(loop, reqs)
        assert ev.wait(120)
    finally:
        loop.stop()
    assert [done[i].token_ids for i in range(2)] == [c.token_ids for c in want]
