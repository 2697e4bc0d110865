"""`/v1/chat/completions`: one handler, streamed (SSE) or not, shared by the proxy.

    resp = await chat_response(state, body, prompt_ids, on_done)

`on_done(outs, version, messages, prompt_ids)` is called once all samples finished, with
the engine's Completions (exact token ids and logprobs), the weights version, the
assistant messages returned and the prompt ids the engine ran (`prompt` plus the ids
`tool_choice` forces, chat.ChatFormat.forced_prefix): the proxy's capture hook
(capture.py). Every response carries the weights version as `system_fingerprint`
("posttrain-v<version>") and, when not streamed, as the `x-posttrain-weights-version` header.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import Any, AsyncIterator, Callable

from fastapi.responses import Response, StreamingResponse

from posttrain.serve.chat import TextStream, cut_stop
from posttrain.serve.logprobs import chat_logprobs
from posttrain.serve.protocol import ApiError, ChatRequest

OnDone = Callable[[list, int, list, tuple], None]
# response ids: unique in this process (a counter) and across processes (a random prefix); a uuid4 per call
# (a getrandom system call) took ~40 us after the server had been idle, on the benchmark VM
_RUN, _SEQ = os.urandom(6).hex(), itertools.count()


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def usage(prompt_len: int, outs: list) -> dict[str, int]:
    comp = sum(len(c.token_ids) for c in outs)
    return {"prompt_tokens": prompt_len, "completion_tokens": comp, "total_tokens": prompt_len + comp}


def _messages(state: Any, body: ChatRequest, outs: list, rid: str, prefix: str) -> list[tuple[dict, str]]:
    res = []
    for c in outs:
        text = prefix + cut_stop(state.fmt.reply_text(c.token_ids), body.stops())
        res.append(state.fmt.reply_message(text, body.tools, body.tool_choice, c.finish_reason, f"{rid}:{c.index}"))
    return res


async def chat_response(state: Any, body: ChatRequest, prompt: tuple[int, ...], on_done: OnDone | None = None) -> Any:
    prefix, forced = state.fmt.forced_prefix(body.tools, body.tool_choice)
    prompt = tuple(prompt) + forced  # the reply starts with the forced call opening: prompt tokens, not sampled
    params = state.params(body, len(prompt), None)
    rid = f"chatcmpl-{_RUN}{next(_SEQ):012x}"
    k = (body.top_logprobs or 0) if body.logprobs else 0
    if body.stream:
        return StreamingResponse(_stream(state, body, prompt, params, rid, k, on_done, prefix),
                                 media_type="text/event-stream", headers={"cache-control": "no-cache"})
    outs, version = await state.complete(prompt, params, rid)
    tops = await state.top_logprobs(prompt, outs, k) if k else None
    msgs = _messages(state, body, outs, rid, prefix)
    if on_done is not None:
        on_done(outs, version, [m for m, _ in msgs], prompt)
    choices = [{"index": c.index, "message": m, "finish_reason": fr,
                "logprobs": chat_logprobs(state.fmt, c.token_ids, c.logprobs, tops[c.index] if tops else None)
                if body.logprobs else None} for c, (m, fr) in zip(outs, msgs)]
    return JSONReply({"id": rid, "object": "chat.completion", "created": int(time.time()), "model": state.model_name,
                      "system_fingerprint": f"posttrain-v{version}", "choices": choices,
                      "usage": usage(len(prompt), outs)}, version)


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))  # JSONResponse's


class JSONReply(Response):
    """JSONResponse's bytes and headers (plus the weights version), built without Starlette's generic header
    handling and a JSONEncoder per call: a third of the cost, on every model call."""

    media_type = "application/json"

    def __init__(self, content: Any, version: int) -> None:
        self.status_code, self.background = 200, None
        self.body = _ENCODER.encode(content).encode()
        self.raw_headers = [(b"content-length", str(len(self.body)).encode()), (b"content-type", b"application/json"),
                            (b"x-posttrain-weights-version", str(version).encode())]


async def _stream(state: Any, body: ChatRequest, prompt: tuple[int, ...], params: Any, rid: str, k: int,
                  on_done: OnDone | None, prefix: str) -> AsyncIterator[bytes]:
    created = int(time.time())
    version = state.engine.weights_version
    hold_tool = bool(body.tools) and body.tool_choice != "none"
    streams = [TextStream(state.fmt, body.stops(), hold_tool, prefix) for _ in range(params.n)]
    outs: dict[int, Any] = {}

    def chunk(i: int, delta: dict, finish: str | None = None, logprobs: Any = None) -> bytes:
        return sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": state.model_name,
                    "system_fingerprint": f"posttrain-v{version}",
                    "choices": [{"index": i, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]})

    for i in range(params.n):
        yield chunk(i, {"role": "assistant", "content": ""})
    try:
        async for ev in state.events(prompt, params, rid):
            if ev[0] == "tokens":
                _, i, ids, lps = ev
                text = streams[i].push(ids)
                lp = chat_logprobs(state.fmt, ids, lps, None) if body.logprobs and not k else None
                if text or lp:
                    yield chunk(i, {"content": text} if text else {}, logprobs=lp)
                continue
            _, i, c, version = ev
            if c.finish_reason == "error":
                raise ApiError(400, c.error)
            outs[i] = c
            if len(outs) < params.n:
                continue
            ordered = [outs[j] for j in range(params.n)]
            tops = await state.top_logprobs(prompt, ordered, k) if k else None
            msgs = _messages(state, body, ordered, rid, prefix)
            if on_done is not None:
                on_done(ordered, version, [m for m, _ in msgs], prompt)
            for j, (c, (m, fr)) in enumerate(zip(ordered, msgs)):
                delta: dict[str, Any] = {}
                rest = streams[j].finish(m["content"] or "") if fr != "tool_calls" else ""
                if rest:
                    delta["content"] = rest
                if fr == "tool_calls":
                    delta["tool_calls"] = [{"index": 0, **tc} for tc in m["tool_calls"]]
                lp = chat_logprobs(state.fmt, c.token_ids, c.logprobs, tops[j]) if tops else None
                yield chunk(j, delta, fr, lp)
            if body.stream_options is not None and body.stream_options.include_usage:
                yield sse({"id": rid, "object": "chat.completion.chunk", "created": created,
                           "model": state.model_name, "choices": [], "usage": usage(len(prompt), ordered)})
    except ApiError as e:
        yield sse(e.body())
    yield b"data: [DONE]\n\n"
