"""`posttrain sft CONFIG`, `posttrain dpo CONFIG` (the `sft` and `dpo` recipes, recipes/pipeline.py),
`posttrain postmortem RUN`: thin calls into the library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from posttrain.store.run import TRAJECTORIES


def _launch(recipe: str, config: Path, overrides: List[str], out: Optional[Path], overwrite: bool,
            plugins: List[Path], needs: tuple[str, ...]) -> dict:
    """Load, then the shared launcher: every name and file checked, the run directory claimed,
    all before any model work (sft/dpo do not resume)."""
    from posttrain.cli.common import launch
    from posttrain.config import load_config

    cfg = load_config(config, overrides or [], plugins=plugins)  # --plugin files before the names are checked
    run_dir = out or Path(cfg.out_dir) / cfg.name
    return launch(recipe, cfg, run_dir, f"posttrain {recipe} {config}", overwrite=overwrite, needs=needs)


_OVERWRITE = typer.Option(False, "--overwrite", help="replace an earlier run in the run directory")
_PLUGIN = typer.Option([], "--plugin", help="a .py file defining extra domains/verifiers/losses (repeatable)")


def register(app: typer.Typer) -> None:
    @app.command()
    def sft(
        config: Path = typer.Argument(..., help="run config YAML (section sft; sft.data = chat JSONL)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. sft.steps=100 sft.pack=true"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        overwrite: bool = _OVERWRITE,
        plugin: List[Path] = _PLUGIN,
    ) -> None:
        """Supervised fine-tuning on chat JSONL (assistant-only loss, optional packing, eval loss)."""
        typer.echo(json.dumps(_launch("sft", config, overrides, out, overwrite, plugin, ("model",)), indent=2))

    @app.command()
    def dpo(
        config: Path = typer.Argument(..., help="run config YAML (section dpo; dpo.data or dpo.from_run)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. dpo.loss=ipo dpo.beta=0.1"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        overwrite: bool = _OVERWRITE,
        plugin: List[Path] = _PLUGIN,
    ) -> None:
        """Direct preference optimisation (sigmoid or IPO) on pairs from a file or an RL run."""
        typer.echo(json.dumps(_launch("dpo", config, overrides, out, overwrite, plugin, ("model", "dpo")), indent=2))

    @app.command()
    def postmortem(
        run: Path = typer.Argument(..., help=f"a run directory with {TRAJECTORIES}"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default RUN/postmortem)"),
    ) -> None:
        """Turn a run's failed trajectories + verifier feedback into SFT JSONL and DPO pairs."""
        from posttrain.train.postmortem import postmortem as build

        typer.echo(json.dumps(build(run, out), indent=2))
