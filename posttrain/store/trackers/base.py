"""The tracker protocol and its registry: where a run's scalar metrics go besides metrics.jsonl.

    @tracker("tensorboard")
    def tensorboard(run_dir: Path, run: RunInfo) -> Tracker: ...

    t = open_tracker("wandb", run_dir, RunInfo(name="quickstart", config={...}))
    t.log(step, {"reward/mean": 0.4}); t.close()

metrics.jsonl stays the source of truth (the viewer and reports read it); trackers are
views of it for the tools people already use. A tracker gets only finite numeric scalars.
Optional libraries are imported when a tracker opens, never at import of this package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from posttrain.registry import registry


@dataclass(frozen=True)
class RunInfo:
    name: str = "run"
    project: str = "posttrain"
    phase: str = ""  # "sft", "dpo", "rl": keeps phases of one run apart in a shared store
    config: Mapping[str, Any] = field(default_factory=dict)


class Tracker(Protocol):
    """Where metrics go besides metrics.jsonl; the registry holds factories (run dir, RunInfo) -> Tracker."""

    def log(self, step: int, scalars: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


TrackerFactory = Callable[[Path, RunInfo], Tracker]


def tracker(name: str) -> Callable[[TrackerFactory], TrackerFactory]:
    return registry("tracker").register(name)


def open_tracker(name: str, run_dir: str | Path, run: RunInfo | None = None) -> Tracker:
    """Build the tracker registered as `name` (ConfigError naming the known ones otherwise)."""
    return registry("tracker").get(name)(Path(run_dir), run or RunInfo())  # get() imports the built-ins


def log_phase(cfg: Any, run_dir: str | Path, phase: str, rows: list[dict[str, float]]) -> None:
    """Send a finished phase's per-step rows (step = index) to `cfg.log.trackers` only, without
    touching metrics.jsonl (which holds the RL steps): the quickstart's SFT warm-up curve."""
    log = getattr(cfg, "log", None)
    info = RunInfo(name=cfg.name, project=log.project if log is not None else "posttrain", phase=phase,
                   config=cfg.model_dump(mode="json"))
    for name in (log.trackers if log is not None else ["tensorboard"]):
        t = open_tracker(name, run_dir, info)
        try:
            for step, row in enumerate(rows):
                t.log(step, row)
        finally:
            t.close()
