"""One run directory as the viewer reads it: metrics rows, the trajectory store, pinned tasks.

    run = RunView(Path("runs/quickstart"))
    run.metrics()          # every metrics.jsonl row so far (re-reads only the new bytes)
    with run.db() as db:   # a read-only SQLite connection, or None before the store exists
        ...
    run.prompt("code-0-7") # the task's prompt text, from run_dir/tasks/*.jsonl

Limits: a run's tasks are read once (they are pinned before training starts); a run
without pinned tasks shows trajectories without their prompt text.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from posttrain.eval.run_data import pinned_prompts

STORE_FILE = "trajectories.sqlite"
# The viewer's filters and curves run on these; created once per store when it is writable
# (a CREATE INDEX takes the write lock for a moment, never while a step commits for long).
INDEXES = (
    "CREATE INDEX IF NOT EXISTS view_kind_domain_step ON trajectories (kind, domain, step)",
    "CREATE INDEX IF NOT EXISTS view_kind_reward ON trajectories (kind, reward)",
    "CREATE INDEX IF NOT EXISTS view_kind_version ON trajectories (kind, weights_version)",
)


def _sqrt(x: float | None) -> float | None:
    return math.sqrt(x) if x is not None and x > 0 else 0.0


class RunView:
    def __init__(self, path: Path, label: str | None = None) -> None:
        self.path = Path(path)
        self.label = label or self.path.name
        self._rows: list[dict[str, Any]] = []
        self._offset = 0
        self._lock = threading.Lock()
        self._indexed = False
        self._prompts: dict[str, str] | None = None
        self._db_lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._cache: dict[str, tuple[tuple[int, int], Any]] = {}

    # ---- metrics.jsonl, read incrementally -------------------------------------------
    def metrics(self) -> list[dict[str, Any]]:
        p = self.path / "metrics.jsonl"
        with self._lock:
            if not p.is_file():
                return []
            size = p.stat().st_size
            if size < self._offset:  # truncated by a resume: start over
                self._rows, self._offset = [], 0
            with open(p, "rb") as f:
                f.seek(self._offset)
                chunk = f.read(size - self._offset)
            end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
            for line in chunk[:end].splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and "step" in row:
                    self._rows.append(row)
            self._offset += end
            return list(self._rows)

    # ---- the trajectory store ----------------------------------------------------------
    def _ensure_indexes(self, path: Path) -> None:
        if self._indexed:
            return
        try:
            con = sqlite3.connect(path, timeout=2.0)
            for sql in INDEXES:
                con.execute(sql)
            con.commit()
            con.close()
        except sqlite3.Error:
            pass  # read-only media or a busy writer: queries still answer, just without these indexes
        self._indexed = True

    @contextmanager
    def db(self) -> Iterator[sqlite3.Connection | None]:
        """The run's read-only connection, one user at a time. It is kept open between requests
        (each statement still sees the newest commit: WAL, autocommit), so the caches below
        and the temp table of group statistics survive from one request to the next."""
        path = self.path / STORE_FILE
        if not path.is_file():
            yield None
            return
        with self._db_lock:
            if self._con is None:
                self._ensure_indexes(path)
                self._con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
                self._con.create_function("sqrt", 1, _sqrt, deterministic=True)
            yield self._con

    def stamp(self, con: sqlite3.Connection) -> tuple[int, int]:
        """(rows, newest rowid): changes with every write, insert, replace or truncation."""
        return tuple(con.execute("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM trajectories").fetchone())

    def cached(self, name: str, con: sqlite3.Connection, compute: Any) -> Any:
        """`compute(con)`, recomputed only when the store changed since the last call."""
        stamp = self.stamp(con)
        hit = self._cache.get(name)
        if hit is None or hit[0] != stamp:
            hit = (stamp, compute(con))
            self._cache[name] = hit
        return hit[1]

    # ---- pinned tasks --------------------------------------------------------------------
    def prompts(self) -> dict[str, str]:
        if self._prompts is None:
            self._prompts = pinned_prompts(self.path)
        return self._prompts

    def prompt(self, task_id: str) -> str:
        return self.prompts().get(task_id, "")

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "path": str(self.path)}
        for name in ("summary.json", "config.yaml"):
            out["has_" + name.split(".")[0]] = (self.path / name).is_file()
        if (self.path / "summary.json").is_file():
            try:
                out["summary"] = json.loads((self.path / "summary.json").read_text())
            except ValueError:
                pass
        return out


def _tokenizer_file(run_dir: Path) -> Path | None:
    for sub in ("model", "sft-model", "base-model"):
        p = run_dir / sub / "tokenizer.json"
        if p.is_file():
            return p
    found = sorted((run_dir / "checkpoints").glob("step-*/tokenizer.json"))
    return found[-1] if found else None


def token_pieces(run: RunView, ids: list[int], text: str) -> list[str]:
    """One display string per token id: decoded with the run's tokenizer.json when it has one
    (the `tokenizers` library, no model load), else the text's characters when their count
    matches, else the ids themselves."""
    tok = getattr(run, "_tok", None)
    if tok is None:
        path = _tokenizer_file(run.path)
        tok = False
        if path is not None:
            try:
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(path))
            except Exception:  # noqa: BLE001 - an unreadable tokenizer only costs the display
                tok = False
        run._tok = tok  # type: ignore[attr-defined]
    if tok:
        return [tok.decode([i], skip_special_tokens=False) for i in ids]
    if len(text) == len(ids):
        return list(text)
    return [f"<{i}>" for i in ids]
