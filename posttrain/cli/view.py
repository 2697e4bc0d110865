"""`posttrain view RUN [RUN2 ...]`: the local web viewer over run directories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from posttrain.errors import ConfigError


def register(app: typer.Typer) -> None:
    @app.command("view")
    def view(
        runs: Annotated[list[Path], typer.Argument(help="run directories (a training or eval run; two or more to compare)")],
        host: Annotated[str, typer.Option(help="address to bind; loopback by default (the viewer has no login)")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="port (0 picks a free one)")] = 8765,
    ) -> None:
        """Browse runs live in a web page: curves, trajectories, groups, eval flips, detectors."""
        for r in runs:
            if not r.is_dir():
                raise ConfigError(f"{r}: not a run directory")
        import uvicorn

        from posttrain.view.app import create_app

        if host not in ("127.0.0.1", "localhost", "::1"):
            typer.echo(f"posttrain: warning: binding {host}: anyone who can reach it can read these runs", err=True)
        typer.echo(f"posttrain view: http://{host}:{port}/  ({len(runs)} run(s); Ctrl-C to stop)")
        uvicorn.run(create_app(runs), host=host, port=port, log_level="warning")
