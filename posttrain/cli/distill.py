"""`posttrain distill CONFIG`: on-policy distillation from a teacher model (the `distill` recipe,
recipes/distill.py; docs/second_model.md). The same run directory, progress, Ctrl-C checkpoint,
--resume and before/after table as `posttrain rl`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def _print_distill(summary: dict, run_dir: Path) -> None:
    from posttrain.cli.train import _print_summary

    _print_summary(summary, run_dir, stage="distillation")
    d = summary.get("distill", {})
    b, a = d.get("reverse_kl_before"), d.get("reverse_kl_after")
    if b is not None and a is not None:
        typer.echo(f"held-out reverse KL to the teacher {d['teacher']} (nats/token, exact over the vocabulary, on the "
                   f"student's own completions): before {b:.4f}, after {a:.4f} ({a - b:+.4f})")


def _run(config: Optional[Path], overrides: List[str], out: Optional[Path], resume: Optional[Path],
         overwrite: bool, plugins: List[Path]) -> None:
    from posttrain.cli.common import launch
    from posttrain.recipes.distill import distill_config
    from posttrain.store.run import RunDir
    from posttrain.store.run_dir import claim_run_dir

    if resume is not None:
        claim_run_dir(resume, resume=True)  # a run directory, before its config.yaml is read
        cfg = distill_config(RunDir(resume).config, overrides, base={}, plugins=plugins)
        run_dir = resume
    else:
        cfg = distill_config(config, overrides, plugins=plugins)  # the teacher checked: one line naming the key, no weights read
        run_dir = out or Path(cfg.out_dir) / cfg.name
    command = f"posttrain distill {config}" if config is not None else "posttrain distill"
    # the run's judge / user models are opened by the pipeline (recipes/pipeline.py); the teacher by the recipe
    summary = launch("distill", cfg, run_dir, command, resume=resume is not None, overwrite=overwrite)
    _print_distill(summary, run_dir)


def register(app: typer.Typer) -> None:
    @app.command()
    def distill(
        config: Optional[Path] = typer.Argument(None, help="run config YAML with distill.teacher (optional with --resume)"),
        overrides: List[str] = typer.Argument(None, help="dotted overrides, e.g. distill.teacher.path=runs/rl/model"),
        out: Optional[Path] = typer.Option(None, "--out", help="run directory (default <out_dir>/<name>)"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue the run in this directory"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace an earlier run in the run directory"),
        plugin: List[Path] = typer.Option([], "--plugin", help="a .py file defining extra domains/verifiers (repeatable)"),
    ) -> None:
        """On-policy distillation: the student samples, the teacher scores every token, the student
        minimises the reverse KL (held-out eval and KL to the teacher before and after)."""
        overrides = list(overrides or [])
        if config is not None and "=" in str(config) and not config.exists():
            overrides.insert(0, str(config))  # `distill --resume RUN key=value`: no config file given
            config = None
        if config is None and resume is None:
            from posttrain.errors import ConfigError

            raise ConfigError("posttrain distill needs a CONFIG file (or --resume RUN)")
        _run(config, overrides, out, resume, overwrite, plugin)
