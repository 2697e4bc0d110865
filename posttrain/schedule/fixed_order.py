"""A fixed prompt order: replay another framework's batches, step by step, by task id.

    schedule:
      policy: fixed_order
      args: {order_file: order.txt}     # one line per RL step: that step's task ids

The file is plain text, one line per step, ids separated by spaces or commas (`#` starts a
comment; blank lines are skipped), or a `.json` file holding a list of lists of ids. Step s
of the run gets line s, in that order: every line names exactly `rl.prompts_per_step` ids,
and the file has at least `rl.steps` lines. An id not in the run's RL split is a one-line
ConfigError before any model work (`check_order`); so is a line of the wrong length.

The scheduler still observes pass rates (its metrics and plots), but draws nothing: the
`fixed_order` policy's weights are flat and unused. Resume continues at the next line (the
scheduler's draw count is in its checkpointed state).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

import numpy as np

from posttrain.errors import ConfigError
from posttrain.registry import sched_policy
from posttrain.schedule.stats import StatsView

KEY = "schedule.args.order_file"


@sched_policy("fixed_order")
def fixed_order(view: StatsView, step: int) -> np.ndarray:
    """Flat weights: the scheduler replays `schedule.args.order_file` instead of drawing."""
    return np.ones(len(view.alpha))


def load_order(path: str | Path) -> list[list[str]]:
    """The order file's steps, each a list of task ids; a one-line ConfigError if unreadable."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{KEY}: order file not found: {p}")
    text = p.read_text()
    if p.suffix == ".json":
        try:
            steps = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{p}: not JSON ({e}); {KEY} takes a list of lists of task ids") from None
        if not isinstance(steps, list) or not all(isinstance(s, list) and all(isinstance(i, str) for i in s)
                                                  for s in steps):
            raise ConfigError(f"{p}: {KEY} must hold a list of lists of task ids (strings)")
        return steps
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [[i for i in re.split(r"[\s,]+", line) if i] for line in lines if line]


def check_order(order: list[list[str]], ids: Iterable[str], per_step: int, steps: int, where: str = KEY) -> None:
    """One-line ConfigErrors: a step of the wrong size, too few steps, an id outside the split."""
    if not order:
        raise ConfigError(f"{where}: the order file names no step")
    for s, line in enumerate(order):
        if len(line) != per_step:
            raise ConfigError(f"{where}: step {s} names {len(line)} tasks; rl.prompts_per_step={per_step}")
    if len(order) < steps:
        raise ConfigError(f"{where}: the order file has {len(order)} steps; rl.steps={steps} needs as many")
    known = set(ids)
    for s, line in enumerate(order):
        for tid in line:
            if tid not in known:
                raise ConfigError(f"{where}: step {s} names task {tid!r}, which is not in the RL split "
                                  "(tasks.domains / tasks.files, less tasks.sft_frac's demonstrations)")
