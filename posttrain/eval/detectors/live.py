"""The detectors inside the RL loop: every `log.detect_every` steps, their findings become
`detect/<name>` (0/1) and `detect/<name>/score` metrics, and a first alarm becomes a run
warning (st.warnings, printed once, kept in summary.json).

    row.update(detector_metrics(st, row))

Cost: each call reads the trajectories of the last WINDOW steps (the exploit, universal and
length detectors read each stored completion of them), so it stays constant as the run
grows; benchmarks/view_bench.py times all five over a 10,240-trajectory run (docs/benchmarks.md,
"Viewer"). The viewer and report.html run the detectors over the whole run.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

from posttrain.eval.detectors.base import run_detectors

WINDOW = 50  # RL steps of trajectories each live check reads


def detector_metrics(st: Any, row: dict[str, Any]) -> dict[str, float]:
    st.store.flush()  # the background writer's queued steps are on disk before we read
    path = st.run_dir / "trajectories.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0) if path.is_file() else None
    try:
        findings = run_detectors([*st.history, {"step": st.step, **row}], db, min_step=st.step - WINDOW + 1)
    finally:
        if db is not None:
            db.close()
    out: dict[str, float] = {}
    for f in findings:
        out.update(f.metrics())
        if f.alarm and f"detect/{f.detector}" not in st.warnings:
            st.warnings[f"detect/{f.detector}"] = text = f"reward-hacking detector {f.detector}: {f.message}"
            print(f"posttrain: warning: {text}", file=sys.stderr)
    return out
