"""FastEngine's `StreamingEngine` half (rollout/engine.py): one scheduling step at a time.

`FastEngine.generate` runs one scheduling loop per call. A server instead calls, from one
thread and inside `with engine.serving():` (which holds the engine's lock while it has work):

    engine.open_lanes(lanes, lane_len)    # once: lanes for max_batch sequences of the context
    err = engine.submit(rid, request)     # queued ("" ) or refused (the reason)
    tokens, done = engine.step()          # expire, admit, one decode step; what came out since
    engine.cancel(rid); engine.release(rid)

Requests submitted at any moment join the running batch at the next step, share its decode
forward and the prefix cache, and leave as soon as they finish. Lanes are allocated once, so
admission never reallocates (and loses) the KV of running sequences; a request longer than
the lanes waits until nothing runs, then grows them. Text only (no image prompts).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from posttrain.rollout.engine import Completion, GenRequest, SamplingParams

Tokens = list[tuple[int, int, list[int], list[float]]]  # (request id, sample, new token ids, their logprobs)
Done = list[tuple[int, int, Completion]]  # (request id, sample, its completion)


@dataclass
class _Waiting:
    req: int
    samples: list[int]  # sample indices not yet admitted
    deadline: float | None


class Streaming:
    """Mixed into FastEngine: the scheduler's own methods (`_expire`, `_admit`, `_step`,
    `_ensure_lanes`) driven one step at a time, behind the public StreamingEngine calls."""

    def open_lanes(self, lanes: int | None = None, lane_len: int | None = None) -> None:
        self._stream_reqs: dict[int, GenRequest] = {}
        self._stream_queue: deque[_Waiting] = deque()
        self._stream_done: dict[tuple[int, int], Completion] = {}
        self._stream_sent: dict[tuple[int, int], int] = {}  # tokens already reported per (request, sample)
        n = min(self.max_batch, lanes or self.max_batch)
        whole = min(self.max_len, lane_len or self.max_len)
        fake = {0: GenRequest((0,), SamplingParams(max_new_tokens=whole, n=n))}
        with self._lock:
            self._ensure_lanes(fake, deque([_Waiting(0, list(range(n)), None)]))

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Hold the engine for the server while it has work: nothing else may touch lanes and active."""
        with self._lock:
            self._seeds, self._feats = {}, {}
            yield

    def submit(self, rid: int, req: GenRequest) -> str:
        err = self._check(req) or ("image inputs are not supported by the server" if req.images else "")
        if self.weights_version < 0:
            err = "engine weights are invalid after a failed reload; load a checkpoint with POST /admin/weights"
        if err:
            return err
        p = req.params
        self._stream_reqs[rid] = req
        self._seeds[rid] = p.seed if p.seed is not None else self._rng.getrandbits(62)
        deadline = None if req.deadline_s is None else time.monotonic() + req.deadline_s
        self._stream_queue.append(_Waiting(rid, list(range(p.n)), deadline))
        return ""

    def cancel(self, rid: int) -> None:
        """Its samples finish with reason "deadline", queued or running."""
        for w in self._stream_queue:
            if w.req == rid:
                w.deadline = 0.0  # _expire retires it
        for s in self.active:
            if s.req == rid:
                s.deadline = 0.0  # the finisher retires it at its next token

    def step(self, admit: bool = True) -> tuple[Tokens, Done]:
        """Expire, admit (unless a weights reload is draining the batch) and decode once."""
        if self._stream_queue:
            self._expire(self._stream_queue, self._stream_reqs, self._stream_done)
            if admit and self._stream_queue:
                self._admit_streamed()
        if self.active:
            self._step(self._stream_done)
        return self._collect()

    def running(self) -> int:
        return len(self.active)

    def queued(self) -> int:
        return sum(len(w.samples) for w in list(self._stream_queue))

    def release(self, rid: int) -> None:
        """Every sample of `rid` is done and reported."""
        self._stream_reqs.pop(rid, None)
        self._seeds.pop(rid, None)

    def weights_mismatch(self, state: Mapping[str, Any]) -> str:
        """Why `state` (HF names) cannot be installed into the served model; "" if it fits."""
        views, tied = self._views, ("lm_head.weight" if self.lm.tied else None)
        missing = sorted(set(views) - set(state))
        extra = sorted(set(state) - set(views) - ({tied} if tied else set()))
        if missing or extra:
            return f"missing {missing[:3]}, unexpected {extra[:3]}"
        for name, view in views.items():
            if tuple(state[name].shape) != tuple(view.shape):
                return f"{name} has shape {tuple(state[name].shape)}, the served model has {tuple(view.shape)}"
        return ""

    def install_serving(self, state: Mapping[str, Any], version: int) -> Any:
        """`load_weights` for the serving thread, which already holds the engine (`serving()`)."""
        return self._load_weights(state, version, None)

    def _admit_streamed(self) -> None:
        """Admit the waiting requests whose sequences fit the lanes; a longer one grows them when idle."""
        reqs = self._stream_reqs
        slack = (self.spec.lookahead + 1) if self.spec is not None else 1

        def fits(w: _Waiting) -> bool:
            r = reqs[w.req]
            return min(len(r.prompt_ids) + r.params.max_new_tokens, self.max_len) + slack <= self.lanes.cap

        if not fits(self._stream_queue[0]):
            if self.active:  # let the batch drain (admitting others could starve this request)
                return
            self._ensure_lanes(reqs, deque([self._stream_queue[0]]))  # nothing running: reallocating loses nothing
        self._admit(deque(w for w in self._stream_queue if fits(w)), reqs, self._stream_done)
        self._stream_queue = deque(w for w in self._stream_queue if w.samples)

    def _collect(self) -> tuple[Tokens, Done]:
        tokens: Tokens = []
        for s in self.active:
            key = (s.req, s.sample)
            sent = self._stream_sent.get(key, 0)
            if len(s.out) > sent:
                tokens.append((s.req, s.sample, list(s.out[sent:]), list(s.lps[sent:])))
                self._stream_sent[key] = len(s.out)
        done: Done = []
        for key in list(self._stream_done):
            c = self._stream_done.pop(key)
            sent = self._stream_sent.pop(key, 0)
            if len(c.token_ids) > sent:
                tokens.append((key[0], key[1], list(c.token_ids[sent:]), list(c.logprobs[sent:])))
            done.append((key[0], key[1], c))
        return tokens, done
