"""A run directory, named once: every path in it, and the one way to read its trajectories.

    run = RunDir("runs/quickstart")
    run.config, run.metrics, run.summary, run.trajectories   # Path objects
    run.checkpoint(40)                                        # runs/quickstart/checkpoints/step-40
    with run.queries() as q:                                  # read-only; None before the first step
        rows = q.page(Filters(domain="code"))
    store = run.store(background=True)                        # the RL loop's writer

Layout (docs/view.md, "The run directory and its one reader"):

    config.yaml            the resolved config (`--resume` reads it back)
    metrics.jsonl          one JSON row per step (store/metrics.py)
    summary.json           the run's final numbers and warnings
    trajectories.sqlite    every sample (store/trajectories.py writes, store/run_queries.py reads)
    report.html            the self-contained report (eval/run_report.py)
    eval_before.json, eval_after.json   a recipe's held-out evaluations (recipes/quickstart.py)
    scheduler.png          the scheduler's page (schedule/plots.py)
    tasks/*.jsonl          the pinned train / held-out tasks
    tb/                    TensorBoard events
    checkpoints/step-N/    a checkpoint after step N (train/checkpoint.py); .tmp-step-N while written;
                           dcp-step-N/ holds a sharded run's optimizer shards
    postmortem/            `posttrain postmortem`'s SFT and DPO files
    base-model/, sft-model/, model/   models a recipe saved (the start of RL, the SFT warm-up,
                           the sft / dpo recipes' result)

No module outside posttrain/store spells these names: tests/unit/core/test_run_dir_owner.py
fails when one does.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
TRAJECTORIES = "trajectories.sqlite"
REPORT = "report.html"
TASKS = "tasks"
TENSORBOARD = "tb"
CHECKPOINTS = "checkpoints"
POSTMORTEM = "postmortem"
SCHEDULER_PAGE = "scheduler.png"  # schedule/plots.py draws it, report.html embeds it
EVAL_PREFIX = "eval_"  # eval_before.json / eval_after.json: a recipe's held-out evaluations
BASE_MODEL = "base-model"  # the model RL started from (a recipe's copy)
SFT_MODEL = "sft-model"  # the quickstart / vision recipes' SFT warm-up
MODEL = "model"  # the sft / dpo recipes' trained model
CHECKPOINT_PREFIX = "step-"  # checkpoints/step-N
CHECKPOINT_TMP_PREFIX = ".tmp-step-"  # checkpoints/.tmp-step-N while it is written
DCP_PREFIX = "dcp-step-"  # checkpoints/dcp-step-N: a sharded run's optimizer shards
_STEP = re.compile(r"^step-(\d+)$")


def checkpoint_step(path: str | Path) -> int | None:
    """N of a `step-N` directory name; None for any other name."""
    m = _STEP.match(Path(path).name)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class RunDir:
    path: Path

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    # ---- files ------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY

    @property
    def trajectories(self) -> Path:
        return self.path / TRAJECTORIES

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def tasks(self) -> Path:
        return self.path / TASKS

    @property
    def tensorboard(self) -> Path:
        return self.path / TENSORBOARD

    @property
    def postmortem(self) -> Path:
        return self.path / POSTMORTEM

    @property
    def scheduler_page(self) -> Path:
        return self.path / SCHEDULER_PAGE

    def eval_result(self, phase: str) -> Path:
        """A recipe's held-out evaluation at `phase` ("before" or "after" RL)."""
        return self.path / f"{EVAL_PREFIX}{phase}.json"

    @property
    def base_model(self) -> Path:
        return self.path / BASE_MODEL

    @property
    def sft_model(self) -> Path:
        return self.path / SFT_MODEL

    @property
    def model(self) -> Path:
        return self.path / MODEL

    def is_run(self) -> bool:
        """A directory a training command wrote: it holds config.yaml."""
        return self.config.is_file()

    def has_trajectories(self) -> bool:
        return self.trajectories.is_file()

    def read_summary(self) -> dict[str, Any] | None:
        """summary.json as a dict; None when it is missing, unreadable or not an object."""
        try:
            out = json.loads(self.summary.read_text())
        except (OSError, ValueError):
            return None
        return out if isinstance(out, dict) else None

    # ---- checkpoints ------------------------------------------------------------------
    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"{CHECKPOINT_PREFIX}{step}"

    def checkpoint_tmp(self, step: int) -> Path:
        return self.checkpoints / f"{CHECKPOINT_TMP_PREFIX}{step}"

    def stale_checkpoint_tmps(self) -> list[Path]:
        """Half-written checkpoints an earlier process left behind (killed mid-write)."""
        return sorted(self.checkpoints.glob(f"{CHECKPOINT_TMP_PREFIX}*"))

    def dcp_checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"{DCP_PREFIX}{step}"

    def dcp_checkpoints(self) -> list[Path]:
        return sorted(self.checkpoints.glob(f"{DCP_PREFIX}*"))

    def checkpoint_steps(self) -> list[int]:
        """N of every `checkpoints/step-N` directory, ascending (written or not: see
        train/checkpoint.py list_checkpoints for the finished ones)."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(s for p in self.checkpoints.iterdir() if p.is_dir() and (s := checkpoint_step(p)) is not None)

    def newest_checkpoint(self) -> tuple[int, Path] | None:
        """(step, path) of the newest `checkpoints/step-N` (numerically: step-10 after step-9), or None."""
        steps = self.checkpoint_steps()
        return (steps[-1], self.checkpoint(steps[-1])) if steps else None

    # ---- the trajectory store ---------------------------------------------------------
    def store(self, background: bool = False) -> Any:
        """The writer (store/trajectories.py TrajectoryStore); it creates the database."""
        from posttrain.store.trajectories import TrajectoryStore

        return TrajectoryStore(self.trajectories, background=background)

    @contextmanager
    def queries(self) -> Iterator[Any]:
        """Read-only queries (store/run_queries.py RunQueries) over trajectories.sqlite, closed
        on exit; None when the run has no store yet."""
        from posttrain.store.run_queries import RunQueries

        q = RunQueries.open(self.trajectories)
        try:
            yield q
        finally:
            if q is not None:
                q.close()
