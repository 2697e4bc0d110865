"""`posttrain eval`, `posttrain compare`, `posttrain replay`: thin calls into posttrain.eval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def compare_cmd(
    run_a: Path = typer.Argument(..., help="Baseline evaluation run directory (before)."),
    run_b: Path = typer.Argument(..., help="Candidate evaluation run directory (after)."),
    margin: float = typer.Option(0.02, help="Regression margin: fail when the CI lower bound < -margin."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 on a regression (for CI)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object."),
    report: Optional[Path] = typer.Option(None, help="HTML report path (default RUN_B/report.html)."),
    seed: int = typer.Option(0, help="Seed of the paired bootstrap."),
) -> None:
    """Paired before/after comparison of two evaluation runs, with a regression gate."""
    from posttrain.eval.compare import compare_runs
    from posttrain.eval.report import comparison_markdown, write_report

    cmp = compare_runs(run_a, run_b, margin=margin, seed=seed)
    path = write_report(cmp, report or run_b / "report.html")
    if as_json:
        print(json.dumps({**cmp.to_dict(), "report": str(path)}, default=str))
    else:
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(comparison_markdown(cmp, str(path))))
    if fail_on_regression and cmp.regressions:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
