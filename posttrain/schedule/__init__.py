"""Which task comes next: stratified mixtures, pass-rate statistics, adaptive weights, a
per-domain difficulty curriculum, zero-variance filtering and long-tail queues. See docs/scheduler.md.

Importing this package registers the built-in `sched_policy` implementations
(`uniform`, `learning_signal`, `difficulty_pools`, `fixed_order`).
"""

from posttrain.schedule import fixed_order, policies  # noqa: F401  (registers the built-in policies)
from posttrain.schedule.filtering import FillResult, fill_batch, has_signal, is_scored
from posttrain.schedule.scheduler import Scheduler

__all__ = ["Scheduler", "FillResult", "fill_batch", "has_signal", "is_scored"]
