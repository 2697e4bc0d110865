"""`posttrain serve MODEL`: an OpenAI-compatible server on the `fast` engine (docs/serve.md)."""

from __future__ import annotations

from typing import Optional

import typer


def serve_cmd(
    model: str = typer.Argument(..., help="A model directory, a training run (its newest checkpoint, as `eval --model`), "
                                          "a catalog name (posttrain models list) or 'tiny'."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; anything but loopback needs --api-key."),
    port: int = typer.Option(8000, help="TCP port."),
    api_key: Optional[str] = typer.Option(None, "--api-key", envvar="POSTTRAIN_API_KEY",
                                          help="Require 'Authorization: Bearer KEY' on every route but /health."),
    speculative: Optional[str] = typer.Option(None, help="Speculative decoding: 'ngram' (prompt lookup) or 'draft' "
                                                        "(a draft model: --draft-model)."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model",
                                              help="Draft model for --speculative draft: a directory, catalog name "
                                                   "or 'tiny'; it must share MODEL's tokenizer."),
    max_batch: int = typer.Option(32, help="Sequences decoded together (lanes allocated once)."),
    max_len: int = typer.Option(2048, help="Context served, in tokens (capped at the model's own)."),
    name: Optional[str] = typer.Option(None, help="Model id reported by /v1/models (default: from MODEL)."),
) -> None:
    """Serve MODEL with /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics, /admin/weights."""
    from posttrain.serve.server import check_bind, check_speculative

    check_bind(host, api_key)  # before loading anything: the one-line refusals come at once
    check_speculative(speculative, draft_model)
    model = model_argument(model)
    draft_model = model_argument(draft_model) if draft_model else None
    import uvicorn

    from posttrain.serve.app import build_app
    from posttrain.serve.server import load_engine
    from posttrain.serve.service import ServeState

    eng, tok, served = load_engine(model, max_batch=max_batch, max_len=max_len, speculative=speculative,
                                  draft_model=draft_model)
    state = ServeState.create(eng, tok, name or served, api_key=api_key)
    print(f"posttrain serve: {name or served} on http://{host}:{port}/v1 (context {eng.max_len}, "
          f"batch {eng.max_batch}{', speculative ' + speculative if speculative else ''}"
          f"{' with ' + draft_model if draft_model else ''})", flush=True)
    try:
        uvicorn.run(build_app(state), host=host, port=port, log_level="warning", access_log=False)
    finally:
        state.close()


def model_argument(model: str) -> str:
    """A run directory becomes its newest checkpoint (as `eval --model RUN`); a path that does
    not exist is reported as a missing path, not as an unknown catalog name."""
    from pathlib import Path

    from posttrain.eval.modelref import model_dir_of

    p = Path(model).expanduser()
    if model == "tiny":
        return model
    if p.exists() or "/" in model or model.startswith((".", "~")):
        return str(model_dir_of(p)[0])  # ModelError naming the resolved path when it is missing
    from posttrain.errors import ModelError
    from posttrain.models.catalog import real_model

    try:
        real_model(model)
    except ModelError as e:  # neither: say both places it looked
        raise ModelError(f"no model directory {p.resolve()}, and {e}") from None
    return model


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
