"""`posttrain eval`, `posttrain compare`, `posttrain replay`: thin calls into posttrain.eval."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, List, Optional

import typer

from posttrain.cli.common import load_plugins, plugin_option
from posttrain.eval.infra import DEFAULT_MAX_INFRA_RATE
from posttrain.store.run import REPORT, SUMMARY, TRAJECTORIES, RunDir


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
    report: Optional[Path] = typer.Option(None, help=f"HTML report path (default RUN_B/{REPORT})."),
    seed: int = typer.Option(0, help="Seed of the paired bootstrap."),
) -> None:
    """Paired before/after comparison of two evaluation runs, with a regression gate."""
    from posttrain.eval.compare import compare_runs
    from posttrain.eval.report import write_report

    cmp = compare_runs(run_a, run_b, margin=margin, seed=seed)
    path = write_report(cmp, report or RunDir(run_b).report)
    if as_json:
        print(_dumps({**cmp.to_dict(), "report": str(path)}))
    else:
        _print_comparison(cmp, str(path))
    if fail_on_regression and (cmp.regressions or cmp.unproven):
        raise typer.Exit(1)


def _print_comparison(cmp, report_path: str) -> None:
    """The terminal's comparison: a compact table that wraps to the console width (COLUMNS), the
    notes and verdict below it; the full table is in report.html."""
    from rich import box
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    from posttrain.eval.report import COMPACT_HEADER, comparison_markdown, compact_row

    con = Console()
    md = comparison_markdown(cmp, report_path, table=False).split("\n", 2)
    con.print(Markdown(md[0]))
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for i, h in enumerate(COMPACT_HEADER):
        t.add_column(h, overflow="fold", justify="left" if i in (0, 5) else "right")
    for d in cmp.domains + [cmp.overall]:
        t.add_row(*compact_row(d), style="bold" if d is cmp.overall else None)
    con.print(t)
    con.print(Markdown(md[2]))


def eval_cmd(
    out: Path = typer.Option(..., "--out", help=f"Run directory for samples.jsonl and {SUMMARY} (resumable)."),
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
    limit: Optional[int] = typer.Option(None, "--limit", min=1,
                                        help="Evaluate a seeded sample of N tasks, stratified by domain (to size a run)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the --limit sample."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Discard an earlier evaluation in --out and start afresh."),
    max_infra_rate: float = typer.Option(DEFAULT_MAX_INFRA_RATE, "--max-infra-rate", min=0.0, max=1.0,
                                         help="Exit 2 when more than this share of samples are infrastructure errors."),
    plugin: List[Path] = plugin_option(),
) -> None:
    """Evaluate a model on a suite; rerun with the same --out to resume an interrupted run (samples whose
    verdict was an infrastructure error are redone). Prints an estimate after the first batch."""
    import asyncio

    from posttrain.eval.cache import default_cache_path
    from posttrain.eval.modelref import resolve_model
    from posttrain.eval.records import SAMPLES_FILE, EvalError, clear_eval_run
    from posttrain.eval.reverify import reverify_run
    from posttrain.eval.runner import EvalOptions, evaluate
    from posttrain.eval.suite import load_suite

    load_plugins(plugin)  # before the suite generates its domains and --reverify builds verifiers
    if model is None and not (reverify and (out / SAMPLES_FILE).exists()):
        raise EvalError("--model is required (only `--reverify N` on an existing --out can omit it)")
    summary = None
    if model is not None:
        from posttrain.config_check import check_engine_available, check_task_names

        ref, s = resolve_model(model), load_suite(suite)
        check_task_names(s.tasks, str(s.path))  # every verifier and tool the tasks name, before the model loads
        check_engine_available(engine, ref.path)
        if overwrite:
            clear_eval_run(out)
        opts = EvalOptions(epochs=epochs, temperature=temperature, engine=engine, generation=generation,
                           sandboxes=sandboxes, cache=None if no_cache else (cache or default_cache_path()),
                           progress=None if as_json else EtaProgress(), limit=limit, limit_seed=seed)
        summary = asyncio.run(_with_sandbox(lambda sb: evaluate(ref, s, out, opts, sb), sandboxes or 2))
    flakes = asyncio.run(_with_sandbox(lambda sb: reverify_run(out, reverify, sb), sandboxes or 2)) if reverify else None
    failed = infra_failure_of(out, summary, max_infra_rate)
    if as_json:
        print(_dumps({"summary": summary, "reverify": flakes, "infra_failure": failed}))
    else:
        _print_eval(summary, flakes, out)
    if failed:  # after the table, so the user sees what was judged; the line names the cause
        raise EvalError(f"{failed}. Fix it and rerun with the same --out: those samples are redone ({out}/{SAMPLES_FILE})")


def infra_failure_of(out: Path, summary: Optional[dict], max_rate: float) -> Optional[str]:
    from posttrain.eval.infra import infra_failure
    from posttrain.eval.records import SAMPLES_FILE, RecordFile

    if summary is None:
        return None
    return infra_failure(RecordFile(out / SAMPLES_FILE).load().values(), max_rate)


def _print_eval(summary: Optional[dict], flakes: Optional[dict], out: Path) -> None:
    from rich.console import Console
    from rich.markdown import Markdown

    from rich import box
    from rich.table import Table

    from posttrain.eval.summary import NOTE, sampling_line, summary_table

    con = Console()
    if summary is not None:  # a table that folds to the terminal's width (COLUMNS) instead of cutting names
        con.print(Markdown(f"## {summary['run']['suite']} on {summary['run']['model']}"))
        con.print(sampling_line(summary["run"]), highlight=False)
        head, rows = summary_table(summary)
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
        for i, h in enumerate(head):
            t.add_column(h, overflow="fold", no_wrap=h.startswith("score"), justify="left" if i == 0 else "right")
        for cells in rows:
            t.add_row(*cells, style="bold" if cells[0] == "ALL" else None)
        con.print(t)
        con.print(NOTE, highlight=False)
        t = summary["timing"]
        con.print(f"wall {t['wall_s']:.1f}s: engine startup {t['engine_startup_s']:.1f}s, generation {t['generation_s']:.1f}s, verification "
                  f"{t['verification_s']:.1f}s, harness {t['harness_s']:.1f}s ({t['harness_frac']:.1%}); "
                  f"{summary['run']['samples_new']} new, {summary['run']['samples_resumed']} resumed samples -> {out}")
    if flakes is not None:
        worst = sorted(flakes["tasks"].items(), key=lambda kv: -kv[1]["flake_rate"])[:10]
        con.print(f"reverify x{flakes['n']}: flake rate {flakes['flake_rate']:.1%} over {flakes['samples']} samples; "
                  + ", ".join(f"{k} {v['flake_rate']:.0%}" for k, v in worst if v["flaky"]))


class EtaProgress:
    """Progress of an evaluation on stderr: the samples to run, then after each batch the rate
    and the time left (the first batch is small, so the first estimate comes early)."""

    def __init__(self) -> None:
        self.t0 = 0.0
        self.said_estimate = False

    def __call__(self, done: int, total: int) -> None:
        import sys
        import time

        from posttrain.eval.sizing import Estimate, fmt_duration

        if done == 0:
            self.t0 = time.perf_counter()
            print(f"  {total} samples to run; a time estimate follows the first batch", file=sys.stderr, flush=True)
            return
        est = Estimate(total, done, time.perf_counter() - self.t0)
        if not self.said_estimate and done < total:
            self.said_estimate = True
            print(f"  estimate: {est.per_sample_s:.1f}s per sample over the first {done} -> about "
                  f"{fmt_duration(est.remaining_s)} for the {total - done} left (larger batches are faster per sample; "
                  f"a smaller run: --limit N)", file=sys.stderr, flush=True)
        print(f"\r  {est.line()}   ", end="\n" if done >= total else "", file=sys.stderr, flush=True)


async def _with_sandbox(fn, concurrency: int):
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool(concurrency=concurrency)
    try:
        return await fn(pool)
    finally:
        await pool.close()


def replay_cmd(
    run: Path = typer.Argument(..., help=f"Training run ({TRAJECTORIES}) or evaluation run (samples.jsonl)."),
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
