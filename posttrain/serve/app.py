"""The FastAPI application: OpenAI routes, health, metrics, hot reload, the agent proxy.

    app = build_app(state)            # state: service.ServeState
    uvicorn.run(app, host="127.0.0.1", port=8000)

Every error is OpenAI's JSON shape (`{"error": {"message", "type", "param", "code"}}`)
with a 4xx status for the client's mistakes: malformed JSON, wrong field types, unknown
model, a prompt longer than the context (400, `context_length_exceeded`), a body over
`protocol.MAX_BODY` bytes (413), a missing or wrong API key (401), an unknown route (404).
With `state.api_key` set, every route but `/health` needs `Authorization: Bearer KEY`.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from posttrain.serve.capture import episode_chat
from posttrain.serve.protocol import ApiError, ChatRequest, CompletionRequest, WeightsRequest, parse
from posttrain.serve.protocol import read_body as _body
from posttrain.serve.protocol import receive_body


def _error(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status)


def _unauthorized(scope: dict, st: Any) -> JSONResponse | None:
    """The 401 for a request without the server's key, when it has one."""
    if st.api_key is None:
        return None
    got = dict(scope["headers"]).get(b"authorization", b"")
    if hmac.compare_digest(got, f"Bearer {st.api_key}".encode()):
        return None
    return _error(ApiError(401, "missing or incorrect API key: send Authorization: Bearer KEY",
                           kind="authentication_error", code="invalid_api_key"))


def _counting(st: Any, send: Any) -> Any:
    async def counted(message: dict) -> None:
        if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
            st.counters["errors_4xx"] += 1
        await send(message)

    return counted


class Guard:
    """API key and request/4xx counters, as plain ASGI: Starlette's `@app.middleware("http")` runs
    every request through a task group and memory streams, a few hundred microseconds a call."""

    def __init__(self, app: Any, state: Any) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/health":
            return await self.app(scope, receive, send)
        st = self.state
        st.counters["requests"] += 1
        denied = _unauthorized(scope, st)
        if denied is not None:
            st.counters["errors_4xx"] += 1
            return await denied(scope, receive, send)
        await self.app(scope, receive, _counting(st, send))


_EP, _CHAT = "/episodes/", "/v1/chat/completions"


class ServeApp(FastAPI):
    """FastAPI, with the proxy's model calls (POST /episodes/{id}/v1/chat/completions) answered before
    FastAPI's middleware, routing and dependency machinery, which cost about 0.4 ms of each call (the
    proxy's budget is 2 ms over a direct engine call, docs/benchmarks.md). The fast path does what the
    stack did for the route: counters, API key, body limit, every error as OpenAI's JSON. Elsewhere
    (another method, a root path) the request goes through FastAPI, to the same handler."""

    serve_state: Any = None  # the ServeState when the proxy is on

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        st = self.serve_state
        if st is not None and scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path = scope["path"]
            if path.startswith(_EP) and path.endswith(_CHAT):
                eid = path[len(_EP):-len(_CHAT)]
                if eid and "/" not in eid:  # what the route's {eid} matches; anything else goes the usual way
                    return await self._episode_chat(st, eid, scope, receive, send)
        await super().__call__(scope, receive, send)

    async def _episode_chat(self, st: Any, eid: str, scope: dict, receive: Any, send: Any) -> None:
        st.counters["requests"] += 1
        resp = _unauthorized(scope, st)
        if resp is None:
            try:
                raw = await receive_body(scope, receive)
                if raw is None:  # the client left before its body arrived: nobody to answer
                    return
                resp = await episode_chat(st, eid, raw, time.perf_counter())
            except ApiError as e:
                resp = _error(e)
            except Exception as e:  # noqa: BLE001  a bug answers as JSON and is logged, as the app's handler does
                logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
                resp = _error(ApiError(500, f"internal error: {type(e).__name__}: {e}", kind="server_error"))
        await resp(scope, receive, _counting(st, send))


def build_app(state: Any) -> FastAPI:
    from posttrain.serve.metrics import Throughput, render

    app = ServeApp(title="posttrain serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = state
    rate = Throughput()

    app.add_middleware(Guard, state=state)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError) -> JSONResponse:
        return _error(e)

    @app.exception_handler(Exception)
    async def server_error(_: Request, e: Exception) -> JSONResponse:  # a bug answers as JSON, the server stays up
        return _error(ApiError(500, f"internal error: {type(e).__name__}: {e}", kind="server_error"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        return _error(ApiError(e.status_code, str(e.detail), kind=kind))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        return _error(ApiError(400, f"invalid request: {e.errors()[0].get('msg', 'bad value')}"))

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok" if state.engine.weights_version >= 0 else "weights_invalid",
                "model": state.model_name, "weights_version": state.engine.weights_version}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(render(state, rate.update(time.monotonic(), state.loop.tokens_out)),
                                 media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": state.model_name, "object": "model", "created": state.created,
                                            "owned_by": "posttrain"}]}

    @app.get("/v1/models/{name}")
    async def model(name: str) -> dict[str, Any]:
        state.check_model(name)
        return {"id": state.model_name, "object": "model", "created": state.created, "owned_by": "posttrain"}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        from posttrain.serve.chat_route import chat_response

        body = parse(ChatRequest, await _body(request))
        state.check_model(body.model)
        prompt = state.fmt.prompt_ids(body.messages, body.tools if body.tool_choice != "none" else None)
        return await chat_response(state, body, prompt)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        from posttrain.serve.completion_route import completion_response

        body = parse(CompletionRequest, await _body(request))
        state.check_model(body.model)
        return await completion_response(state, body)

    @app.post("/admin/weights")
    async def weights(request: Request) -> Any:
        from posttrain.rollout.weight_sync import WeightSyncError
        from posttrain.serve.weights import reload_weights

        body = parse(WeightsRequest, await _body(request))
        try:
            return await reload_weights(state, body)
        except WeightSyncError as e:  # verification failed after copying: the engine refuses to serve
            return JSONResponse(ApiError(500, str(e), kind="server_error", code="weights_invalid").body(), 500)

    if state.episodes is not None:
        from posttrain.serve.capture import add_episode_routes

        add_episode_routes(app, state)
        app.serve_state = state
    return app
