"""`posttrain sft CONFIG`, `posttrain dpo CONFIG`, `posttrain postmortem RUN`: thin calls into posttrain.train."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer


class _LossProgress:
    """A rich progress bar with the ETA, the latest loss and the latest eval metrics."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("[bold]{task.description:<5}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[info]}"))
        self.task: Any = None

    def __enter__(self) -> "_LossProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, phase: str, info: dict) -> None:
        if self.task is None:
            self.task = self.progress.add_task(phase, total=info["total"], info="")
        shown = [f"loss {info['loss']:.4f}"] + [f"{k} {v:.4f}" for k, v in info.items()
                                                if k.startswith("eval/") or k == "accuracy"]
        self.progress.update(self.task, completed=info["step"], info="  ".join(shown))


def _config(config: Path, overrides: List[str]) -> Any:
    from posttrain.config import load_config

    return load_config(config, overrides or [])


def _run_dir(cfg: Any, out: Optional[Path]) -> Path:
    return out or Path(cfg.out_dir) / cfg.name


def register(app: typer.Typer) -> None:
    @app.command()
    def sft(
        config: Path = typer.Argument(..., help="run config YAML (section sft; sft.data = chat JSONL)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. sft.steps=100 sft.pack=true"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
    ) -> None:
        """Supervised fine-tuning on chat JSONL (assistant-only loss, optional packing, eval loss)."""
        from posttrain.train.sft import run_sft

        cfg = _config(config, overrides)
        with _LossProgress() as progress:
            summary = run_sft(cfg, _run_dir(cfg, out), report=progress)
        typer.echo(json.dumps(summary, indent=2))

    @app.command()
    def dpo(
        config: Path = typer.Argument(..., help="run config YAML (section dpo; dpo.data or dpo.from_run)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. dpo.loss=ipo dpo.beta=0.1"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
    ) -> None:
        """Direct preference optimisation (sigmoid or IPO) on pairs from a file or an RL run."""
        from posttrain.train.dpo import run_dpo

        cfg = _config(config, overrides)
        with _LossProgress() as progress:
            summary = run_dpo(cfg, _run_dir(cfg, out), report=progress)
        typer.echo(json.dumps(summary, indent=2))

    @app.command()
    def postmortem(
        run: Path = typer.Argument(..., help="a run directory with trajectories.sqlite"),
        out: Optional[Path] = typer.Option(None, "--out", help="output folder (default RUN/postmortem)"),
    ) -> None:
        """Turn a run's failed trajectories + verifier feedback into SFT JSONL and DPO pairs."""
        from posttrain.train.postmortem import postmortem as build

        typer.echo(json.dumps(build(run, out), indent=2))
