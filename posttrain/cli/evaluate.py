"""`posttrain eval`, `posttrain compare`, `posttrain replay`: thin calls into posttrain.eval."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, List, Optional

import typer

from posttrain.cli.common import load_plugins, plugin_option


def _dumps(obj: Any) -> str:
    """Strict JSON for --json: NaN (pass@k with n < k, an undefined interval) becomes null."""

    def clean(x: Any) -> Any:
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(obj), default=str, allow_nan=False)


def compare_cmd(
    run_a: Path = typer.Argument(..., help="Baseline evaluation run directory (before)."),
    run_b: Path = typer.Argument(..., help="Candidate evaluation run directory (after)."),
    margin: float = typer.Option(0.02, help="Non-inferiority margin: a loss within it counts as unchanged."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                            help="Exit 1 unless every domain is improved or unchanged (for CI)."),
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
        print(_dumps({**cmp.to_dict(), "report": str(path)}))
    else:
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(comparison_markdown(cmp, str(path))))
    if fail_on_regression and (cmp.regressions or cmp.unproven):
        raise typer.Exit(1)


def eval_cmd(
    out: Path = typer.Option(..., "--out", help="Run directory for samples.jsonl and summary.json (resumable)."),
    model: Optional[str] = typer.Option(None, "--model", help="HF model directory or training run (newest checkpoint)."),
    suite: str = typer.Option("regression", "--suite", help="Built-in suite name or suite YAML path."),
    epochs: Optional[int] = typer.Option(None, help="Samples per task (default: the suite's)."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature (default: the suite's)."),
    engine: str = typer.Option("auto", help="Generation engine (auto: fast if available, else hf)."),
    generation: Optional[int] = typer.Option(None, "--generation-concurrency", help="Max samples per engine call."),
    sandboxes: Optional[int] = typer.Option(None, "--sandbox-concurrency", help="Max verifier calls in flight."),
    reverify: int = typer.Option(0, help="Re-score stored outputs N times and report verifier flake rates."),
    cache: Optional[Path] = typer.Option(None, help="Generation cache file (default ~/.cache/posttrain/generations.sqlite)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the generation cache."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    plugin: List[Path] = plugin_option(),
) -> None:
    """Evaluate a model on a suite; rerun with the same --out to resume an interrupted run."""
    import asyncio

    from posttrain.eval.cache import default_cache_path
    from posttrain.eval.modelref import resolve_model
    from posttrain.eval.records import SAMPLES_FILE, EvalError
    from posttrain.eval.reverify import reverify_run
    from posttrain.eval.runner import EvalOptions, evaluate
    from posttrain.eval.suite import load_suite
    from posttrain.eval.summary import summary_markdown

    load_plugins(plugin)  # before the suite generates its domains and --reverify builds verifiers
    if model is None and not (reverify and (out / SAMPLES_FILE).exists()):
        raise EvalError("--model is required (only `--reverify N` on an existing --out can omit it)")
    summary = None
    if model is not None:
        ref, s = resolve_model(model), load_suite(suite)
        opts = EvalOptions(epochs=epochs, temperature=temperature, engine=engine, generation=generation,
                           sandboxes=sandboxes, cache=None if no_cache else (cache or default_cache_path()),
                           progress=None if as_json else _progress)
        summary = asyncio.run(_with_sandbox(lambda sb: evaluate(ref, s, out, opts, sb), sandboxes or 2))
    flakes = asyncio.run(_with_sandbox(lambda sb: reverify_run(out, reverify, sb), sandboxes or 2)) if reverify else None
    if as_json:
        print(_dumps({"summary": summary, "reverify": flakes}))
        return
    from rich.console import Console
    from rich.markdown import Markdown

    con = Console()
    if summary is not None:
        con.print(Markdown(summary_markdown(summary, f"{summary['run']['suite']} on {summary['run']['model']}")))
        t = summary["timing"]
        con.print(f"wall {t['wall_s']:.1f}s: engine startup {t['engine_startup_s']:.1f}s, generation {t['generation_s']:.1f}s, verification "
                  f"{t['verification_s']:.1f}s, harness {t['harness_s']:.1f}s ({t['harness_frac']:.1%}); "
                  f"{summary['run']['samples_new']} new, {summary['run']['samples_resumed']} resumed samples -> {out}")
    if flakes is not None:
        worst = sorted(flakes["tasks"].items(), key=lambda kv: -kv[1]["flake_rate"])[:10]
        con.print(f"reverify x{flakes['n']}: flake rate {flakes['flake_rate']:.1%} over {flakes['samples']} samples; "
                  + ", ".join(f"{k} {v['flake_rate']:.0%}" for k, v in worst if v["flaky"]))


def _progress(done: int, total: int) -> None:
    import sys

    print(f"\r  {done}/{total} samples", end="\n" if done >= total else "", file=sys.stderr, flush=True)


async def _with_sandbox(fn, concurrency: int):
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool(concurrency=concurrency)
    try:
        return await fn(pool)
    finally:
        await pool.close()


def replay_cmd(
    run: Path = typer.Argument(..., help="Training run (trajectories.sqlite) or evaluation run (samples.jsonl)."),
    step: Optional[int] = typer.Option(None, help="Only trajectories of this training step."),
    task: Optional[str] = typer.Option(None, help="Only trajectories of this task id."),
    show_all: bool = typer.Option(False, "--all", help="List unchanged trajectories too."),
    as_json: bool = typer.Option(False, "--json", help="Print every diff as one JSON object."),
    sandboxes: int = typer.Option(2, "--sandbox-concurrency", help="Max verifier calls in flight."),
    plugin: List[Path] = plugin_option(),
) -> None:
    """Re-verify stored trajectories with today's verifiers and show each diff (for debugging rewards)."""
    import asyncio

    from posttrain.eval.replay import diff_lines, replay_run

    load_plugins(plugin)  # a training run's config.yaml names its own; an evaluation run's suite does not

    diffs = asyncio.run(_with_sandbox(lambda sb: replay_run(run, step, task, sb, sandboxes), sandboxes))
    changed = sum(d.changed for d in diffs)
    if as_json:
        print(_dumps({"trajectories": len(diffs), "changed": changed,
                      "diffs": [{**d.__dict__, "changed": d.changed} for d in diffs]}))
        return
    for line in diff_lines(diffs, show_all):
        print(line)
    print(f"{len(diffs)} trajectories re-verified, {changed} changed")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
    app.command("compare")(compare_cmd)
    app.command("replay")(replay_cmd)
