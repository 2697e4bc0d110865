"""The detectors inside the RL loop: every `log.detect_every` steps the loop (train/rl.py
`observe_step`) asks for the findings of the run so far and records them itself, as
`detect/<name>` (0/1) and `detect/<name>/score` metrics and, at a detector's first alarm,
a run warning (st.warnings, printed once, kept in summary.json).

    findings = live_findings(RunDir(run_dir), [*history, row], step)

This module only reads: the run directory through store/run.py, and nothing of the trainer.
Cost: each call reads the trajectories of the last WINDOW steps (the exploit, universal and
length detectors read each stored completion of them), so it stays constant as the run
grows; benchmarks/view_bench.py times all five over a 10,240-trajectory run (docs/benchmarks.md,
"Viewer"). The viewer and report.html run the detectors over the whole run.
"""

from __future__ import annotations

from typing import Any, Sequence

from posttrain.eval.detectors.base import Finding, run_detectors
from posttrain.store.run import RunDir

WINDOW = 50  # RL steps of trajectories each live check reads


def live_findings(run: RunDir, metrics: Sequence[dict[str, Any]], step: int) -> list[Finding]:
    """Every detector's finding over `metrics` (the rows so far, this step's included) and the
    stored trajectories of the WINDOW steps up to `step`. The caller flushes the store first."""
    with run.queries() as q:
        return run_detectors(metrics, q, min_step=step - WINDOW + 1)
