"""`posttrain sft CONFIG`, `posttrain dpo CONFIG`, `posttrain postmortem RUN`: thin calls into posttrain.train."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer


def _prepare(config: Path, overrides: List[str], out: Optional[Path], overwrite: bool, plugins: List[Path],
             needs: tuple[str, ...], command: str) -> tuple[Any, Path]:
    """Load, check every name and file, then claim the run directory: all before any model work."""
    from posttrain.config import load_config
    from posttrain.config_check import check_config
    from posttrain.store.run_dir import claim_run_dir

    cfg = load_config(config, overrides or [])
    cfg.plugins = [*cfg.plugins, *(str(p.resolve()) for p in plugins)]
    check_config(cfg, needs=needs)
    run_dir = out or Path(cfg.out_dir) / cfg.name
    return cfg, claim_run_dir(run_dir, overwrite=overwrite, command=command, resumable=False)  # sft/dpo: no --resume


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
        from posttrain.cli.common import PhaseProgress, interruptible
        from posttrain.train.sft import run_sft

        cfg, run_dir = _prepare(config, overrides, out, overwrite, plugin, ("model",), "posttrain sft")
        with interruptible(run_dir, f"posttrain sft {config}", resumable=False), PhaseProgress() as progress:
            summary = run_sft(cfg, run_dir, report=progress)
        typer.echo(json.dumps(summary, indent=2))

    @app.command()
    def dpo(
        config: Path = typer.Argument(..., help="run config YAML (section dpo; dpo.data or dpo.from_run)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. dpo.loss=ipo dpo.beta=0.1"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        overwrite: bool = _OVERWRITE,
        plugin: List[Path] = _PLUGIN,
    ) -> None:
        """Direct preference optimisation (sigmoid or IPO) on pairs from a file or an RL run."""
        from posttrain.cli.common import PhaseProgress, interruptible
        from posttrain.train.dpo import run_dpo

        cfg, run_dir = _prepare(config, overrides, out, overwrite, plugin, ("model", "dpo"), "posttrain dpo")
        with interruptible(run_dir, f"posttrain dpo {config}", resumable=False), PhaseProgress() as progress:
            summary = run_dpo(cfg, run_dir, report=progress)
        typer.echo(json.dumps(summary, indent=2))

    @app.command()
    def postmortem(
        run: Path = typer.Argument(..., help="a run directory with trajectories.sqlite"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default RUN/postmortem)"),
    ) -> None:
        """Turn a run's failed trajectories + verifier feedback into SFT JSONL and DPO pairs."""
        from posttrain.train.postmortem import postmortem as build

        typer.echo(json.dumps(build(run, out), indent=2))
