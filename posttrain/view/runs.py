"""One run directory as the viewer reads it: metrics rows, the trajectory store, pinned tasks.

    run = RunView(Path("runs/quickstart"))
    run.metrics()          # every metrics.jsonl row so far (re-reads only the new bytes)
    with run.db() as db:   # read-only queries (store/run_queries.py), or None before the store exists
        ...
    run.prompt("code-0-7") # the task's prompt text, from run_dir/tasks/*.jsonl

Limits: a run's tasks are read once (they are pinned before training starts); a run
without pinned tasks shows trajectories without their prompt text.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from posttrain.eval.run_data import pinned_prompts
from posttrain.store.run import RunDir
from posttrain.store.run_queries import RunQueries, ensure_indexes


class RunView:
    def __init__(self, path: Path, label: str | None = None) -> None:
        self.path = Path(path)
        self.run = RunDir(self.path)
        self.label = label or self.path.name
        self._rows: list[dict[str, Any]] = []
        self._offset = 0
        self._lock = threading.Lock()
        self._indexed = False
        self._prompts: dict[str, str] | None = None
        self._db_lock = threading.RLock()
        self._queries: RunQueries | None = None
        self._cache: dict[str, tuple[tuple[int, int], Any]] = {}

    # ---- metrics.jsonl, read incrementally -------------------------------------------
    def metrics(self) -> list[dict[str, Any]]:
        p = self.run.metrics
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
    @contextmanager
    def db(self) -> Iterator[RunQueries | None]:
        """The run's read-only queries (store/run_queries.py), one user at a time, or None before
        the store exists. The connection is kept open between requests (each statement still
        sees the newest commit: WAL, autocommit), so the caches below survive from one request
        to the next. The viewer's indexes are added once, when the store is writable."""
        if not self.run.has_trajectories():
            yield None
            return
        with self._db_lock:
            if self._queries is None:
                if not self._indexed:
                    ensure_indexes(self.run.trajectories)
                    self._indexed = True
                self._queries = RunQueries.open(self.run.trajectories, shared=True)
            yield self._queries

    def stamp(self, q: RunQueries) -> tuple[int, int]:
        """(rows, newest rowid): changes with every write, insert, replace or truncation."""
        return q.stamp()

    def cached(self, name: str, q: RunQueries, compute: Any) -> Any:
        """`compute(q)`, recomputed only when the store changed since the last call."""
        stamp = self.stamp(q)
        hit = self._cache.get(name)
        if hit is None or hit[0] != stamp:
            hit = (stamp, compute(q))
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
        out["has_summary"], out["has_config"] = self.run.summary.is_file(), self.run.is_run()
        summary = self.run.read_summary()
        if summary is not None:
            out["summary"] = summary
        return out


def _tokenizer_file(run_dir: Path) -> Path | None:
    run = RunDir(run_dir)
    for sub in (run.model, run.sft_model, run.base_model):
        p = sub / "tokenizer.json"
        if p.is_file():
            return p
    newest = RunDir(run_dir).newest_checkpoint()  # numerically newest: step-10 after step-9
    return newest[1] / "tokenizer.json" if newest and (newest[1] / "tokenizer.json").is_file() else None


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
