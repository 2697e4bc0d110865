"""`posttrain sft CONFIG`, `posttrain dpo CONFIG` (the `sft` and `dpo` recipes, recipes/pipeline.py),
`posttrain postmortem RUN`: thin calls into the library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from posttrain.store.run import TRAJECTORIES


def _launch(recipe: str, config: Optional[Path], overrides: List[str], out: Optional[Path], overwrite: bool,
            plugins: List[Path], needs: tuple[str, ...], resume: Optional[Path] = None) -> dict:
    """Load, then the shared launcher: every name and file checked, the run directory claimed,
    all before any model work. `resume`: the run directory whose config.yaml (and checkpoints) continue."""
    from posttrain.cli.common import launch
    from posttrain.config import load_config
    from posttrain.errors import ConfigError

    if resume is not None:
        from posttrain.store.run import RunDir
        from posttrain.store.run_dir import claim_run_dir

        claim_run_dir(resume, resume=True)  # a run directory, before its config.yaml is read
        cfg = load_config(RunDir(resume).config, overrides or [], plugins=plugins)
        return launch(recipe, cfg, resume, f"posttrain {recipe}", resume=True, needs=needs)
    if config is None:
        raise ConfigError(f"posttrain {recipe} needs a CONFIG file (or --resume RUN)")
    cfg = load_config(config, overrides or [], plugins=plugins)  # --plugin files before the names are checked
    run_dir = out or Path(cfg.out_dir) / cfg.name
    return launch(recipe, cfg, run_dir, f"posttrain {recipe}", overwrite=overwrite, needs=needs)


def _split_config(config: Optional[Path], overrides: Optional[List[str]]) -> tuple[Optional[Path], List[str]]:
    """`sft --resume RUN key=value`: no config file given, the first override took its place."""
    overrides = list(overrides or [])
    if config is not None and "=" in str(config) and not config.exists():
        return None, [str(config), *overrides]
    return config, overrides


_OVERWRITE = typer.Option(False, "--overwrite", help="replace an earlier run in the run directory")
_PLUGIN = typer.Option([], "--plugin", help="a .py file defining extra domains/verifiers/losses (repeatable)")
_RESUME = typer.Option(None, "--resume", help="continue the interrupted run in this directory from its newest checkpoint")


def register(app: typer.Typer) -> None:
    @app.command()
    def sft(
        config: Optional[Path] = typer.Argument(None, help="run config YAML (section sft; sft.data = chat JSONL; optional with --resume)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. sft.steps=100 sft.pack=true"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        overwrite: bool = _OVERWRITE,
        plugin: List[Path] = _PLUGIN,
        resume: Optional[Path] = _RESUME,
    ) -> None:
        """Supervised fine-tuning on chat JSONL (assistant-only loss, optional packing, eval loss)."""
        config, overrides = _split_config(config, overrides)
        typer.echo(json.dumps(_launch("sft", config, overrides, out, overwrite, plugin, ("model",), resume), indent=2))

    @app.command()
    def dpo(
        config: Optional[Path] = typer.Argument(None, help="run config YAML (section dpo; dpo.data or dpo.from_run; optional with --resume)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. dpo.loss=ipo dpo.beta=0.1"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        overwrite: bool = _OVERWRITE,
        plugin: List[Path] = _PLUGIN,
        resume: Optional[Path] = _RESUME,
    ) -> None:
        """Direct preference optimisation (sigmoid or IPO) on pairs from a file or an RL run."""
        config, overrides = _split_config(config, overrides)
        typer.echo(json.dumps(_launch("dpo", config, overrides, out, overwrite, plugin, ("model", "dpo"), resume), indent=2))

    @app.command()
    def postmortem(
        run: Path = typer.Argument(..., help=f"a run directory with {TRAJECTORIES}"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default RUN/postmortem)"),
    ) -> None:
        """Turn a run's failed trajectories + verifier feedback into SFT JSONL and DPO pairs."""
        from posttrain.train.postmortem import postmortem as build

        typer.echo(json.dumps(build(run, out), indent=2))
