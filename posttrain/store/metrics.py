"""Per-step metrics: JSONL (the source of truth) plus TensorBoard events.

The JSONL file is append-only and flushed with fsync after every step, so a crash
loses at most the step in flight. On resume, `truncate_after(step)` drops lines from
steps newer than the checkpoint, so a resumed run has no duplicated or missing steps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class MetricsLog:
    def __init__(self, run_dir: str | Path, tensorboard: bool = True) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tb_dir = Path(run_dir) / "tb"
        self._tb = None
        self._want_tb = tensorboard

    def _writer(self):
        if self._tb is None and self._want_tb:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.tb_dir))
        return self._tb

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, **{k: v for k, v in metrics.items()}}
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        w = self._writer()
        if w is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    w.add_scalar(k, v, step)
            w.flush()

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
        if self._tb is not None:
            self._tb.close()
