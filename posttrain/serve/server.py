"""Building the served engine from a MODEL argument, and running uvicorn on it.

    engine, tok, name = load_engine("tiny", max_batch=32, max_len=512, speculative=None)
    engine, tok, name = load_engine(DIR, speculative="draft", draft_model=SMALL_DIR)   # a draft model
    with BackgroundServer(build_app(state)) as url:    # tests, the agent proxy: a free port
        openai.OpenAI(base_url=url + "/v1", api_key="x")

MODEL is a model directory, a catalog name (`posttrain models list`; converted once into
~/.cache/posttrain/models/NAME) or `tiny` (the built-in tiny Llama, seed 0).
Binding anywhere but loopback without an API key is refused (`check_bind`), as is
`--speculative draft` without `--draft-model` (`check_speculative`), before anything loads.
The draft model is resolved like MODEL and must share its tokenizer's vocabulary.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from pathlib import Path
from typing import Any

from posttrain.errors import ConfigError


def check_bind(host: str, api_key: str | None) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not api_key:
        raise ConfigError(f"refusing to bind {host} without an API key: pass --api-key KEY (or bind 127.0.0.1)")


SPECULATORS = ("ngram", "draft")


def check_speculative(speculative: str | None, draft_model: str | None) -> None:
    if speculative is not None and speculative not in SPECULATORS:
        raise ConfigError(f"--speculative {speculative!r}: expected one of {', '.join(SPECULATORS)}")
    if speculative == "draft" and not draft_model:
        raise ConfigError("--speculative draft needs --draft-model DIR (a small model sharing the tokenizer)")
    if draft_model and speculative != "draft":
        raise ConfigError(f"--draft-model is used by --speculative draft only, not {speculative or 'none'}")


def load_served_model(model: str) -> tuple[Any, Any, str]:
    """(hf_model, tokenizer, served name) for a directory, a catalog name (converted into
    $POSTTRAIN_MODELS_DIR on first use, models/catalog.py) or `tiny`."""
    from posttrain.models import load_policy

    if model == "tiny":
        from posttrain.models.tiny import build_tiny

        m, tok = build_tiny(seed=0)
        return m, tok, "tiny"
    p = Path(model)
    if p.is_dir():
        from posttrain.models.model_dir import check_model_dir

        check_model_dir(p, need_chat_template=False)
        m, tok = load_policy(p)
        return m, tok, p.name
    from posttrain.models.catalog import catalog_model_dir

    m, tok = load_policy(catalog_model_dir(model))  # an unknown name: an error naming the known models
    return m, tok, model


def load_engine(model: str, max_batch: int = 32, max_len: int | None = 2048, speculative: str | None = None,
                draft_model: str | None = None, **engine_args: Any) -> tuple[Any, Any, str]:
    from posttrain.rollout.engines.fast.engine import FastEngine

    check_speculative(speculative, draft_model)
    m, tok, name = load_served_model(model)
    if draft_model:  # an HF causal LM: the draft speculator builds its own FastLM on the engine's device
        engine_args["draft_model"] = load_served_model(draft_model)[0]
    eng = FastEngine(m, tok, max_batch=max_batch, max_model_len=max_len, speculative=speculative, **engine_args)
    return eng, tok, name


class BackgroundServer:
    """uvicorn serving `app` on a thread, on a port picked by the OS (port=0) or given."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = host, self.sock.getsockname()[1]
        # proxy_headers off: X-Forwarded-* mean nothing on loopback, and the middleware is one more layer a call
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                                    timeout_keep_alive=30, proxy_headers=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                       name="posttrain-uvicorn")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
