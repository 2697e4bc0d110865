"""Synthetic evaluation runs for comparison tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from posttrain.eval.records import META_FILE, SAMPLES_FILE, RecordFile, SampleRecord

# outcomes[(domain, task_id)] = list of per-epoch (passed, steps)
Outcomes = dict[tuple[str, str], list[tuple[bool, int]]]


def write_run(run: Path, outcomes: Outcomes, versions: dict[str, str] | None = None,
              infra: set[tuple[str, int]] = frozenset(), meta: dict | None = None) -> Path:
    recs = []
    for (domain, tid), epochs in outcomes.items():
        for epoch, (passed, steps) in enumerate(epochs):
            bad = (tid, epoch) in infra
            recs.append(SampleRecord(
                task_id=tid, task_version=(versions or {}).get(tid, "v1"), domain=domain, epoch=epoch, seed=epoch,
                prompt=f"prompt {tid}", completion=f"answer {tid} {epoch} {passed}", score=float(passed and not bad),
                passed=passed and not bad, status="infra_error" if bad else "ok", steps=steps, tokens=10 * steps))
    run.mkdir(parents=True, exist_ok=True)
    RecordFile(run / SAMPLES_FILE).append(recs)
    (run / META_FILE).write_text(json.dumps(meta or {"suite": "synthetic"}))
    return run


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    def _make(name: str, outcomes: Outcomes, **kw) -> Path:
        return write_run(tmp_path / name, outcomes, **kw)

    return _make


def _planted(regress_domain: str | None, tasks: int = 20, epochs: int = 5) -> Outcomes:
    """Three domains; in `regress_domain` every task that passed epochs 0-2 now fails them."""
    out: Outcomes = {}
    for d in ("arithmetic", "code", "json"):
        for t in range(tasks):
            base = [((t + e) % 4 != 0, 1 + (t % 3)) for e in range(epochs)]  # ~75% pass
            if d == regress_domain:
                base = [(False if e < 3 else p, s + 2) for e, (p, s) in enumerate(base)]
            out[(d, f"{d}-{t}")] = base
    return out


@pytest.fixture
def planted() -> Callable[..., Outcomes]:
    return _planted


@pytest.fixture
def cli():
    """The eval command group on its own typer app (a callback keeps subcommand names)."""
    import typer
    from typer.testing import CliRunner

    from posttrain.cli.evaluate import register

    app = typer.Typer(pretty_exceptions_enable=False)
    app.callback()(lambda: None)
    register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])
