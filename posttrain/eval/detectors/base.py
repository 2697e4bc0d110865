"""The detector protocol, its registry, and what a detector reports.

    @detector("universal_completion")
    class UniversalCompletion:
        def check(self, run: RunData) -> Finding: ...

    findings = run_detectors(metrics_rows, q)   # every registered detector, in name order

A detector reads a run as it is so far: the metrics.jsonl rows and the run's read-only
trajectory queries (store/run_queries.py RunQueries; None before the first step). It never
raises on thin data: with too little to judge, its finding says so (`alarm=False`,
`enough_data=False`). Detectors only report: a Finding is a record, and what happens with
it (metrics, a run warning) is decided by whoever ran them (train/rl.py in the RL loop).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, Sequence

from posttrain.registry import registry
from posttrain.store.run_queries import RunQueries, as_queries


@dataclass(frozen=True)
class RunData:
    metrics: Sequence[dict[str, Any]]
    db: RunQueries | None
    kind: str = "train"
    min_step: int = 0  # trajectories of earlier steps are not read (the live hook's window)
    cache: dict[str, Any] = field(default_factory=dict, compare=False)  # rows shared by the detectors of one run


@dataclass
class Finding:
    detector: str
    alarm: bool
    score: float  # the statistic compared with the threshold
    threshold: float
    message: str
    enough_data: bool = True
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self) -> dict[str, float]:
        """What the RL loop logs: detect/<name> (0/1) and detect/<name>/score."""
        return {f"detect/{self.detector}": float(self.alarm), f"detect/{self.detector}/score": float(self.score)}

    @property
    def warning_key(self) -> str:
        """The key of this detector's run warning (st.warnings, summary.json): one per detector."""
        return f"detect/{self.detector}"

    def warning(self) -> str:
        """The run warning an alarm becomes."""
        return f"reward-hacking detector {self.detector}: {self.message}"


class Detector(Protocol):
    def check(self, run: RunData) -> Finding: ...


def detector(name: str) -> Any:
    """Register a detector class (built with no arguments) under `name`."""
    return registry("detector").register(name)


def run_detectors(metrics: Sequence[dict[str, Any]], db: Any, kind: str = "train",
                  names: Sequence[str] | None = None, min_step: int = 0) -> list[Finding]:
    """`db`: the run's RunQueries (or None before the store exists)."""
    reg = registry("detector")  # names() imports posttrain.eval.detectors, which registers the built-ins
    data = RunData(metrics, as_queries(db) if db is not None else None, kind, min_step)
    out = []
    for name in names or reg.names():
        f = reg.get(name)().check(data)
        f.detector = name
        out.append(f)
    return out
