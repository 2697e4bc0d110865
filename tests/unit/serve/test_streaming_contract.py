"""serve/loop.py runs on the StreamingEngine protocol, not on FastEngine's internals.

`CountingEngine` is a second StreamingEngine written here from the protocol alone: each
sample emits `prompt[-1] + 1, + 2, ...` one token a step, up to max_new_tokens. The loop
must stream its tokens, finish every sample once, refuse what the engine refuses, and
cancel; FastEngine must satisfy the same protocol.
"""

from __future__ import annotations

import contextlib
import threading

from posttrain.rollout.engine import Completion, GenRequest, SamplingParams, StreamingEngine
from posttrain.serve.loop import EngineLoop


class CountingEngine:
    weights_version = 3
    stop_ids = ()

    def __init__(self) -> None:
        self.live: dict[tuple[int, int], list[int]] = {}  # (rid, sample) -> tokens so far
        self.reqs: dict[int, GenRequest] = {}
        self.cancelled: set[int] = set()

    def open_lanes(self, lanes, lane_len) -> None:
        pass  # nothing to allocate: it keeps no KV

    def serving(self):
        return contextlib.nullcontext()

    def submit(self, rid, req) -> str:
        if not req.prompt_ids:
            return "empty prompt"
        self.reqs[rid] = req
        self.live.update({(rid, k): [] for k in range(req.params.n)})
        return ""

    def cancel(self, rid) -> None:
        self.cancelled.add(rid)

    def step(self, admit=True):
        tokens, done = [], []
        for (rid, k), out in list(self.live.items()):
            req = self.reqs[rid]
            if rid not in self.cancelled:
                out.append(req.prompt_ids[-1] + len(out) + 1)
                tokens.append((rid, k, out[-1:], [-0.5]))
            if rid in self.cancelled or len(out) == req.params.max_new_tokens:
                reason = "deadline" if rid in self.cancelled else "length"
                done.append((rid, k, Completion(req.id, k, tuple(out), (-0.5,) * len(out), "", reason)))
                del self.live[(rid, k)]
        return tokens, done

    def running(self) -> int:
        return len(self.live)

    def queued(self) -> int:
        return 0

    def release(self, rid) -> None:
        self.reqs.pop(rid, None)

    def weights_mismatch(self, state) -> str:
        return ""

    def install_serving(self, state, version):
        self.weights_version = version


def _run(loop, reqs, timeout=30):
    events, ev, left = {}, threading.Event(), [sum(r.params.n for r in reqs)]

    def sink_for(i):
        def sink(e):
            events.setdefault(i, []).append(e)
            if e[0] == "done":
                left[0] -= 1
                if left[0] == 0:
                    ev.set()
        return sink

    handles = [loop.submit(r, sink_for(i)) for i, r in enumerate(reqs)]
    return events, ev, handles


def test_the_counting_engine_is_a_streaming_engine_and_so_is_fast():
    from posttrain.models.tiny import build_tiny
    from posttrain.rollout.engines.fast.engine import FastEngine

    model, tok = build_tiny(seed=0)
    assert isinstance(CountingEngine(), StreamingEngine) and isinstance(FastEngine(model, tok), StreamingEngine)


def test_the_loop_streams_and_finishes_every_sample_of_another_engine():
    loop = EngineLoop(CountingEngine()).start()
    try:
        reqs = [GenRequest((5,), SamplingParams(max_new_tokens=3, n=2)), GenRequest((10,), SamplingParams(max_new_tokens=4))]
        events, ev, _ = _run(loop, reqs)
        assert ev.wait(30)
    finally:
        loop.stop()
    done = {(i, e[1]): e[2] for i, es in events.items() for e in es if e[0] == "done"}
    streamed = {(i, k): [t for e in es if e[0] == "tokens" and e[1] == k for t in e[2]]
                for i, es in events.items() for k in range(reqs[i].params.n)}
    assert {key: c.token_ids for key, c in done.items()} == {(0, 0): (6, 7, 8), (0, 1): (6, 7, 8), (1, 0): (11, 12, 13, 14)}
    assert streamed == {key: list(c.token_ids) for key, c in done.items()}
    assert all(e[3] == 3 for es in events.values() for e in es if e[0] == "done")  # the engine's weights version


def test_what_the_engine_refuses_finishes_as_an_error():
    loop = EngineLoop(CountingEngine()).start()
    try:
        events, ev, _ = _run(loop, [GenRequest((), SamplingParams(max_new_tokens=3))])
        assert ev.wait(30)
    finally:
        loop.stop()
    (kind, _, c, _), = events[0]
    assert kind == "done" and c.finish_reason == "error" and c.error == "empty prompt"


def test_a_cancel_reaches_the_engine():
    eng = CountingEngine()
    loop = EngineLoop(eng).start()
    try:
        events, ev, handles = _run(loop, [GenRequest((1,), SamplingParams(max_new_tokens=10**6))])
        loop.cancel(handles[0])
        assert ev.wait(30)
    finally:
        loop.stop()
    assert events[0][-1][0] == "done" and events[0][-1][2].finish_reason == "deadline"
