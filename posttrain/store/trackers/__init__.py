"""Experiment trackers behind one protocol (registry "tracker"): tensorboard, wandb, mlflow, trackio.

    from posttrain.store.trackers import open_tracker, RunInfo
    t = open_tracker("mlflow", run_dir, RunInfo(name="quickstart", phase="rl"))

Chosen in a config with `log.trackers: [tensorboard, wandb]`; MetricsLog fans every row out.
"""

from posttrain.store.trackers import builtin  # noqa: F401 - registers the built-ins
from posttrain.store.trackers.base import RunInfo, Tracker, log_phase, open_tracker, tracker

__all__ = ["RunInfo", "Tracker", "log_phase", "open_tracker", "tracker"]
