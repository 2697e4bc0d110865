"""What the endpoints share: the engine loop, the chat format, the model's name, the key.

    state = ServeState.create(engine, tokenizer, "tiny", api_key=None)
    async for ev in state.events(prompt_ids, params, "chatcmpl-1"):   # loop events, in order
        ...
    outs, version = await state.complete(prompt_ids, params, "cmpl-1")  # one Completion per sample

A client that disconnects mid-stream cancels its request (the async generator is closed,
which frees the request's lanes at the next engine step).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from posttrain.rollout.engine import Completion, GenRequest, SamplingParams
from posttrain.serve.chat import ChatFormat
from posttrain.serve.loop import EngineLoop
from posttrain.serve.protocol import ApiError


@dataclass
class ServeState:
    engine: Any
    tok: Any
    model_name: str
    loop: EngineLoop
    fmt: ChatFormat
    api_key: str | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    episodes: Any = None  # capture.EpisodeRegistry when the proxy is on
    counters: dict[str, float] = field(default_factory=lambda: {"requests": 0, "errors_4xx": 0, "reloads": 0})

    @classmethod
    def create(cls, engine: Any, tok: Any, model_name: str, api_key: str | None = None, lanes: int | None = None,
               lane_len: int | None = None) -> "ServeState":
        fmt = ChatFormat(tok, engine.stop_ids)
        return cls(engine, tok, model_name, EngineLoop(engine, lanes, lane_len).start(), fmt, api_key)

    def close(self) -> None:
        self.loop.stop()

    # ---- requests -------------------------------------------------------------------------
    def params(self, body: Any, prompt_len: int, default_max: int | None) -> SamplingParams:
        """SamplingParams from a validated body; 400 when the prompt leaves no room to generate."""
        room = self.engine.max_len - prompt_len
        if room < 1:
            raise ApiError(400, f"this model's maximum context length is {self.engine.max_len} tokens; the prompt "
                                f"has {prompt_len}", param="messages", code="context_length_exceeded")
        limit = body.limit() or default_max or room
        return SamplingParams(temperature=1.0 if body.temperature is None else body.temperature,
                              top_p=1.0 if body.top_p is None else body.top_p, max_new_tokens=min(limit, room),
                              stop=body.stops(), seed=body.seed, n=body.n)

    def check_model(self, name: str) -> None:
        if name not in (self.model_name, "default"):
            raise ApiError(404, f"the model {name!r} does not exist; this server serves {self.model_name!r}",
                           param="model", code="model_not_found")

    def check_ids(self, ids: Any) -> None:
        vocab = self.engine.lm.shape.vocab
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise ApiError(400, f"token id {bad[0]} is outside the vocabulary [0, {vocab})", param="prompt")
        if not ids:
            raise ApiError(400, "the prompt is empty", param="prompt")

    async def events(self, prompt_ids: tuple[int, ...], params: SamplingParams, rid: str) -> AsyncIterator[tuple]:
        """The loop's events for one request, in order (a streamed reply: each crosses threads)."""
        aloop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()

        def sink(ev: tuple) -> None:
            aloop.call_soon_threadsafe(q.put_nowait, ev)

        handle = self.loop.submit(GenRequest(prompt_ids, params, id=rid), sink)
        left = params.n
        try:
            while left:
                ev = await q.get()
                if ev[0] == "done":
                    left -= 1
                yield ev
        finally:
            if left:
                self.loop.cancel(handle)

    async def complete(self, prompt_ids: tuple[int, ...], params: SamplingParams, rid: str
                       ) -> tuple[list[Completion], int]:
        """All samples' Completions and the weights version of the last: one future the loop thread settles
        once, not `events`' queue (a thread hop and a task wake-up per sample)."""
        aloop = asyncio.get_running_loop()
        fut = aloop.create_future()
        outs: dict[int, Completion] = {}
        version = [self.engine.weights_version]

        def settle() -> None:
            if not fut.done():
                fut.set_result(None)

        def sink(ev: tuple) -> None:  # loop thread; events come in order
            if ev[0] == "done":
                outs[ev[1]], version[0] = ev[2], ev[3]
                if len(outs) == params.n:
                    aloop.call_soon_threadsafe(settle)

        handle = self.loop.submit(GenRequest(prompt_ids, params, id=rid), sink)
        try:
            await fut
        except BaseException:  # cancelled: free the lanes
            self.loop.cancel(handle)
            raise
        errs = [c.error for c in outs.values() if c.finish_reason == "error"]
        if errs:
            raise ApiError(400, errs[0])
        return [outs[k] for k in range(params.n)], version[0]

    async def top_logprobs(self, prompt: tuple[int, ...], outs: list[Completion], k: int) -> list[list]:
        from posttrain.serve.logprobs import top_alternatives

        if not k:
            return [[] for _ in outs]
        return [await self.loop.call(lambda eng, c=c: top_alternatives(eng, prompt, c.token_ids, k)) for c in outs]
