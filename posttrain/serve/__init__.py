"""An OpenAI-compatible HTTP server on the `fast` engine, and the token-capturing agent proxy.

    posttrain serve tiny --port 8000           # cli/serve.py
    app = build_app(ServeState.create(engine, tok, "tiny"))   # app.py, for tests and the proxy

Modules: `loop.py` drives the engine (one thread, continuous batching across requests),
`protocol.py` validates request bodies and shapes OpenAI errors, `chat.py` maps messages
and tool calls to and from token ids, `routes.py` holds the endpoints, `metrics.py` the
Prometheus text, `capture.py` the per-episode token recorder behind `/episodes/{id}/v1`.
Import submodules by full path; this package re-exports nothing.
"""
