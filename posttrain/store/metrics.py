"""Per-step metrics: JSONL (the source of truth) plus the configured trackers (TensorBoard by
default; posttrain/store/trackers: wandb, mlflow, trackio).

The JSONL file is append-only and flushed with fsync after every step, so a crash
loses at most the step in flight. On resume, `truncate_after(step)` drops lines from
steps newer than the checkpoint, so a resumed run has no duplicated or missing steps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import math
from typing import Any, Sequence

from posttrain.store.run import RunDir


class MetricsLog:
    """`trackers` names registered trackers (default: tensorboard, or none with
    tensorboard=False); each opens at the first logged row, so a run that logs nothing
    creates no tracker files."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, trackers: Sequence[str] | None = None,
                 run: Any = None) -> None:
        self.path = RunDir(run_dir).metrics
        self.tb_dir = RunDir(run_dir).tensorboard
        self._names = list(trackers) if trackers is not None else (["tensorboard"] if tensorboard else [])
        self._run = run  # trackers.RunInfo: name, project, phase, config
        self._trackers: list[Any] | None = None

    def _open(self) -> list[Any]:
        if self._trackers is None:
            from posttrain.store.trackers.base import RunInfo, open_tracker

            self._trackers = [open_tracker(n, self.path.parent, self._run or RunInfo()) for n in self._names]
        return self._trackers

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, **{k: v for k, v in metrics.items()}}
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self._names:
            scalars = {k: float(v) for k, v in metrics.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
            for t in self._open():
                t.log(step, scalars)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a torn last line from a crash: everything before it is good
        return rows

    def truncate_after(self, step: int) -> None:
        rows = [r for r in self.read() if r.get("step", -1) <= step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(tmp, self.path)

    def close(self) -> None:
        for t in self._trackers or []:
            t.close()
        self._trackers = None


def run_metrics(cfg: Any, run_dir: str | Path, phase: str) -> MetricsLog:
    """The MetricsLog of a training phase ("sft", "dpo", "rl"), fanning out to `cfg.log.trackers`."""
    from posttrain.store.trackers.base import RunInfo

    log = getattr(cfg, "log", None)
    names = list(log.trackers) if log is not None else ["tensorboard"]
    info = RunInfo(name=cfg.name, project=log.project if log is not None else "posttrain", phase=phase,
                   config=cfg.model_dump(mode="json"))
    return MetricsLog(run_dir, trackers=names, run=info)
