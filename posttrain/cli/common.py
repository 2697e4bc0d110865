"""Shared CLI helpers: `launch` (every training command's one way into a recipe), the live
progress display for long jobs, what an interrupt prints, `--plugin`."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

import typer


def plugin_option() -> Any:
    """The repeatable `--plugin FILE` of every command that builds tasks or verifiers."""
    return typer.Option([], "--plugin", help="A .py file defining extra domains/verifiers/tools (repeatable).")


def load_plugins(paths: Iterable[Path]) -> None:
    """Import each `--plugin` file before anything looks up a domain or verifier it registers."""
    from posttrain.tasks.plugins import load_plugin

    for p in paths:
        load_plugin(p)


@contextlib.contextmanager
def interruptible(run_dir: Path, command: str, resumable: bool = True) -> Iterator[None]:
    """On Ctrl-C: say where the checkpoint is and how to resume (or rerun), then exit 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        from posttrain.store.run_dir import interrupted_message

        msg = (interrupted_message(run_dir, command) if resumable
               else f"interrupted; this command does not resume: rerun it with --overwrite ({command} --overwrite)")
        print(f"posttrain: {msg}", file=sys.stderr)
        raise SystemExit(130) from None


def launch(recipe: str, cfg: Any, run_dir: Path, command: str, resume: bool = False, overwrite: bool = False,
           needs: Iterable[str] = ("tasks", "model", "rl")) -> dict:
    """Check the config (every name, file and the engine/model pair), claim the run directory,
    then run the recipe's pipeline (recipes/pipeline.py) with live progress: all checks before any
    model work, and Ctrl-C says where the checkpoint is and how to resume (or that it cannot)."""
    from posttrain.config_check import check_config
    from posttrain.recipes.pipeline import get_recipe, run_recipe
    from posttrain.store.run_dir import claim_run_dir, resume_message

    r = get_recipe(recipe)
    if resume and not r.resumable:
        from posttrain.errors import ConfigError

        raise ConfigError(f"--resume: `{command}` does not resume; rerun it with --overwrite")
    check_config(cfg, needs=needs)
    claim_run_dir(run_dir, resume=resume, overwrite=overwrite, command=command, resumable=r.resumable)
    if resume:
        typer.echo(resume_message(run_dir))
    with interruptible(run_dir, command, resumable=r.resumable), PhaseProgress() as progress:
        return run_recipe(r, cfg, run_dir, resume=resume, report=progress, title=command)


class PhaseProgress:
    """A rich progress display fed by `report(phase, info)` callbacks from the library.

    On a terminal: one live bar per phase, each finishing at its true count (an SFT warm-up
    that stops early at step 75 of 300 ends as 75/75). Elsewhere (CI logs, `| tee`): no
    live bars, one plain line every `lines_per_phase`-th of a phase and at its last step."""

    def __init__(self, lines_per_phase: int = 10) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.console = Console()
        self.live = self.console.is_terminal
        self.progress = Progress(TextColumn("[bold]{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[info]}"), transient=False, console=self.console,
                                 disable=not self.live)
        self.tasks: dict[str, Any] = {}
        self.lines_per_phase = lines_per_phase
        self.started: dict[str, tuple[float, int]] = {}  # phase -> (clock, step) at its first report

    def __enter__(self) -> "PhaseProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for task_id in self.tasks.values():  # a phase that stopped early ends at its true count, without an eta
            task = self.progress.tasks[task_id]
            if task.total is not None and task.completed < task.total:
                self.progress.update(task_id, total=task.completed)
        self.progress.__exit__(*exc)

    def _eta(self, phase: str, step: int, total: int) -> str:
        """`  eta 3 min`: the phase's remaining steps at its rate so far (a resumed phase counts from its first step)."""
        import time

        from posttrain.eval.sizing import fmt_duration

        t0, s0 = self.started.setdefault(phase, (time.perf_counter(), step))
        if step <= s0 or step >= total:
            return ""
        return f"  eta {fmt_duration((time.perf_counter() - t0) / (step - s0) * (total - step))}"

    def _line(self, phase: str, info: dict) -> None:
        step, total = info["step"], info["total"]
        every = max(1, total // self.lines_per_phase)
        eta = self._eta(phase, step, total)
        if step % every == 0 or step == total:
            self.console.print(f"{phase} {step}/{total}  {self._describe(phase, info)}{eta}", highlight=False)

    def __call__(self, phase: str, info: dict) -> None:
        if "total" in info:
            if phase not in self.tasks:
                self.tasks[phase] = self.progress.add_task(phase, total=info["total"], info="")
            self.progress.update(self.tasks[phase], completed=info["step"], info=self._describe(phase, info))
            if not self.live:
                self._line(phase, info)
        elif phase == "log":  # a recipe's own line (the agent recipe's warm-up levels, the departures)
            # plain text, whole: a CI log or `| tee` is not cut at 80 columns, and "[...]" is not markup
            self.console.print(info["line"], highlight=False, markup=False, soft_wrap=True)
        elif phase == "eval":
            self.console.print(f"evaluating held-out tasks ({info['name']}): {info['n']} tasks")
        elif phase == "sft_check":
            shown = ", ".join(f"{d} {v:.3f}" for d, v in info["domains"].items())
            self.console.print(f"SFT step {info['step']}: validation pass@1 {info['pass@1']:.3f} ({shown})")
        elif phase == "before":
            shown = ", ".join(f"{d} {v:.3f}" for d, v in info["pass@1"].items())
            self.console.print(f"held-out pass@1 before RL: {shown}")  # after the SFT warm-up, if any

    @staticmethod
    def _describe(phase: str, info: dict) -> str:
        if phase in ("sft", "tower") or ("loss" in info and "reward/mean" not in info):  # sft, dpo: a loss curve
            return "  ".join([f"loss {info['loss']:.3f}"] + [f"{k} {v:.3f}" for k, v in info.items()
                                                               if k.startswith("eval/") or k == "accuracy"])
        parts = [f"reward {info.get('reward/mean', 0):.3f}"]
        if "train/reverse_kl" in info:  # posttrain distill: the sampled reverse KL to the teacher
            parts.append(f"reverse KL {info['train/reverse_kl']:.3f}")
        if "eval/pass@1" in info:
            parts.append(f"held-out {info['eval/pass@1']:.3f}")
        parts.append(f"{info.get('time/step_s', 0):.2f}s/step")
        return "  ".join(parts)
