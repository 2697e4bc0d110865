"""Reward-hacking detectors over a run's stored trajectories and metrics (registry "detector").

    from posttrain.eval.detectors import run_detectors
    for f in run_detectors(metrics_rows, db): print(f.detector, f.alarm, f.message)

Built in (rules.py): reward_vs_heldout, exploit_signatures, universal_completion,
status_shift, length_or_format. The RL loop logs their findings as `detect/...` metrics
(live.py), the viewer shows them, report.html lists them.
"""

from posttrain.eval.detectors import rules  # noqa: F401 - registers the built-ins
from posttrain.eval.detectors.base import Detector, Finding, RunData, detector, run_detectors

__all__ = ["Detector", "Finding", "RunData", "detector", "run_detectors"]
