"""Shared CLI helpers: the live progress display for long jobs."""

from __future__ import annotations

from typing import Any


class PhaseProgress:
    """A rich progress display fed by `report(phase, info)` callbacks from the library."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("[bold]{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[info]}"), transient=False)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> "PhaseProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, phase: str, info: dict) -> None:
        if "total" in info:
            if phase not in self.tasks:
                self.tasks[phase] = self.progress.add_task(phase, total=info["total"], info="")
            self.progress.update(self.tasks[phase], completed=info["step"], info=self._describe(phase, info))
        elif phase == "eval":
            self.progress.console.print(f"evaluating held-out tasks ({info['name']}): {info['n']} tasks")
        elif phase == "sft_check":
            shown = ", ".join(f"{d} {v:.3f}" for d, v in info["domains"].items())
            self.progress.console.print(f"SFT step {info['step']}: validation pass@1 {info['pass@1']:.3f} ({shown})")
        elif phase == "before":
            shown = ", ".join(f"{d} {v:.3f}" for d, v in info["pass@1"].items())
            self.progress.console.print(f"held-out pass@1 after SFT, before RL: {shown}")

    @staticmethod
    def _describe(phase: str, info: dict) -> str:
        if phase in ("sft", "tower"):
            return f"loss {info['loss']:.3f}"
        parts = [f"reward {info.get('reward/mean', 0):.3f}"]
        if "eval/pass@1" in info:
            parts.append(f"held-out {info['eval/pass@1']:.3f}")
        parts.append(f"{info.get('time/step_s', 0):.2f}s/step")
        return "  ".join(parts)
