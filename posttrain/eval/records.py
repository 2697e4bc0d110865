"""Per-sample evaluation records: one JSON line each, appended and fsync'd as they finish.

    store = RecordFile(run_dir / "samples.jsonl")
    done = store.load()                    # key -> SampleRecord; repairs a torn last line
    store.append([rec, ...])               # durable once this returns

A sample's key is (task id, task version, epoch). An interrupted run leaves at most one
torn final line (the write in flight when it died); `load` cuts it off and says so. Any
other unreadable line is corruption and raises `EvalError` naming the file and line,
because silently skipping it would make a resumed run re-generate or a comparison drop
samples without anyone noticing.

Infra errors (the verifier or sandbox could not judge, the engine crashed) are recorded
with `status="infra_error"` and are excluded from every pass rate, never counted as 0.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from posttrain.errors import PosttrainError
from posttrain.store.run import REPORT, SUMMARY

SAMPLES_FILE = "samples.jsonl"
META_FILE = "meta.json"
SUMMARY_FILE = SUMMARY  # an evaluation run names its summary and report as a training run does

# Failures at these boundaries are ours, not the model's: kept out of pass rates.
INFRA_BOUNDARIES = frozenset({"engine", "sandbox", "verifier"})


class EvalError(PosttrainError):
    """A bad suite, run directory or result file. The message names it."""


def sample_key(task_id: str, task_version: str, epoch: int) -> str:
    return f"{task_id}@{task_version}#{epoch}"


@dataclass
class SampleRecord:
    task_id: str
    task_version: str
    domain: str
    epoch: int
    seed: int
    prompt: str
    completion: str
    score: float
    passed: bool
    status: str  # "ok" | "infra_error"
    details: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    steps: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    gen_s: float = 0.0
    verify_s: float = 0.0
    error: dict[str, str] | None = None  # {"boundary": ..., "message": ...}
    cached: bool = False
    trajectory: dict[str, Any] | None = None  # thawed Trajectory, for replay / reverify

    @property
    def key(self) -> str:
        return sample_key(self.task_id, self.task_version, self.epoch)

    @property
    def infra_error(self) -> bool:
        return self.status == "infra_error"

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"), default=str)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> "SampleRecord":
        known = {f for f in cls.__dataclass_fields__}
        missing = [f for f in ("task_id", "task_version", "epoch", "passed", "score", "status") if f not in obj]
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing)}")
        return cls(**{k: v for k, v in obj.items() if k in known})


class RecordFile:
    """Append-only JSONL of `SampleRecord`s with durable appends and torn-tail repair."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self, repair: bool = True) -> dict[str, SampleRecord]:
        """Read every record; the last one wins for a repeated key (a reverify rewrite)."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        out: dict[str, SampleRecord] = {}
        offset = 0
        for i, line in enumerate(lines):
            end = offset + len(line) + 1
            if line.strip():
                try:
                    rec = SampleRecord.from_dict(json.loads(line))
                except (ValueError, TypeError) as e:
                    torn_tail = i == len(lines) - 1 and not raw.endswith(b"\n")
                    if torn_tail and repair:
                        self._truncate(offset, i + 1)
                        break
                    raise EvalError(f"{self.path}:{i + 1}: corrupted sample record ({e}); "
                                    f"fix or delete that line, then rerun to resume") from None
                out[rec.key] = rec
            offset = end
        return out

    def _truncate(self, offset: int, line_no: int) -> None:
        print(f"posttrain: {self.path}:{line_no}: dropped a torn final record from an interrupted write",
              file=sys.stderr)
        with open(self.path, "r+b") as f:
            f.truncate(offset)

    def append(self, records: Iterable[SampleRecord]) -> None:
        blob = "".join(r.to_json() + "\n" for r in records)
        if not blob:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())


RUN_FILES = (SAMPLES_FILE, META_FILE, SUMMARY_FILE, REPORT)


def clear_eval_run(out: Path) -> None:
    """`eval --overwrite`: remove an earlier evaluation's files from `out`; refuse a directory
    that holds anything else, so a mistyped --out never deletes a user's files."""
    if not out.exists():
        return
    if not out.is_dir():
        raise EvalError(f"--out {out} is a file, not a run directory")
    other = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES and not p.name.endswith(".tmp"))
    if other:
        raise EvalError(f"--overwrite: {out} is not an evaluation run directory (it holds {', '.join(other[:5])}); "
                        "refusing to delete anything in it")
    for p in out.iterdir():
        p.unlink()


def read_json(path: Path, what: str) -> dict[str, Any]:
    """Load a JSON object file, turning every failure into an EvalError naming the file."""
    if not path.is_file():
        raise EvalError(f"{what} not found: {path}")
    try:
        obj = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise EvalError(f"{path}: corrupted {what} ({e})") from None
    if not isinstance(obj, dict):
        raise EvalError(f"{path}: corrupted {what} (expected a JSON object)")
    return obj


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


def load_run_records(run_dir: str | Path) -> tuple[dict[str, Any], list[SampleRecord]]:
    """(meta, records) of an evaluation run directory, with clear errors for bad input."""
    d = Path(run_dir)
    if not d.is_dir():
        raise EvalError(f"run directory not found: {d}")
    samples = d / SAMPLES_FILE
    if not samples.is_file():
        raise EvalError(f"{d} is not an evaluation run (no {SAMPLES_FILE}); run `posttrain eval --out {d}` first")
    meta = read_json(d / META_FILE, "run metadata") if (d / META_FILE).exists() else {}
    recs = list(RecordFile(samples).load(repair=False).values())
    if not recs:
        raise EvalError(f"{samples}: no sample records")
    return meta, recs
