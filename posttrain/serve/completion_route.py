"""`/v1/completions`: raw text (or token ids) in, continuation out, streamed (SSE) or not.

A string prompt is tokenised without special tokens (no BOS is added); a list of ints is
used as the token ids themselves. `max_tokens` defaults to 16, as in OpenAI's API.
`logprobs: k` returns the sampled tokens' logprobs and, for k > 0, the top-k alternatives.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, AsyncIterator

from fastapi.responses import JSONResponse, StreamingResponse

from posttrain.serve.chat import TextStream, cut_stop
from posttrain.serve.chat_route import sse, usage
from posttrain.serve.logprobs import completion_logprobs
from posttrain.serve.protocol import ApiError, CompletionRequest

DEFAULT_MAX_TOKENS = 16


def prompt_ids(state: Any, body: CompletionRequest) -> tuple[int, ...]:
    ids = tuple(body.prompt) if isinstance(body.prompt, list) else state.fmt.encode(body.prompt)
    state.check_ids(ids)
    return ids


async def completion_response(state: Any, body: CompletionRequest) -> Any:
    prompt = prompt_ids(state, body)
    params = state.params(body, len(prompt), DEFAULT_MAX_TOKENS)
    rid = f"cmpl-{uuid.uuid4().hex[:24]}"
    k = body.logprobs or 0
    echo = state.fmt.reply_text(prompt) if body.echo else ""
    if body.stream:
        return StreamingResponse(_stream(state, body, prompt, params, rid, echo), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})
    outs, version = await state.complete(prompt, params, rid)
    tops = await state.top_logprobs(prompt, outs, k) if k else None
    choices = []
    for c in outs:
        text = cut_stop(state.fmt.reply_text(c.token_ids), body.stops())
        lp = completion_logprobs(state.fmt, c.token_ids, c.logprobs, tops[c.index] if tops else None, len(echo)) \
            if body.logprobs is not None else None
        choices.append({"index": c.index, "text": echo + text, "logprobs": lp,
                        "finish_reason": "length" if c.finish_reason == "length" else "stop"})
    return JSONResponse({"id": rid, "object": "text_completion", "created": int(time.time()), "model": state.model_name,
                         "system_fingerprint": f"posttrain-v{version}", "choices": choices,
                         "usage": usage(len(prompt), outs)}, headers={"x-posttrain-weights-version": str(version)})


async def _stream(state: Any, body: CompletionRequest, prompt: tuple[int, ...], params: Any, rid: str, echo: str
                  ) -> AsyncIterator[bytes]:
    created = int(time.time())
    streams = [TextStream(state.fmt, body.stops(), False) for _ in range(params.n)]
    outs = []

    def chunk(i: int, text: str, finish: str | None = None, logprobs: Any = None) -> bytes:
        return sse({"id": rid, "object": "text_completion", "created": created, "model": state.model_name,
                    "choices": [{"index": i, "text": text, "logprobs": logprobs, "finish_reason": finish}]})

    if echo:
        for i in range(params.n):
            yield chunk(i, echo)
    try:
        async for ev in state.events(prompt, params, rid):
            if ev[0] == "tokens":
                _, i, ids, lps = ev
                text = streams[i].push(ids)
                lp = completion_logprobs(state.fmt, ids, lps, None) if body.logprobs is not None else None
                if text or lp:
                    yield chunk(i, text, logprobs=lp)
                continue
            _, i, c, _ = ev
            if c.finish_reason == "error":
                raise ApiError(400, c.error)
            outs.append(c)
            final = cut_stop(state.fmt.reply_text(c.token_ids), body.stops())
            yield chunk(i, streams[i].finish(final), "length" if c.finish_reason == "length" else "stop")
        if body.stream_options is not None and body.stream_options.include_usage:
            yield sse({"id": rid, "object": "text_completion", "created": created, "model": state.model_name,
                       "choices": [], "usage": usage(len(prompt), outs)})
    except ApiError as e:
        yield sse(e.body())
    yield b"data: [DONE]\n\n"
