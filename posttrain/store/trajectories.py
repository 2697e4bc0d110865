"""SQLite trajectory store: every sample of a run, idempotent by (step, group, sample).

    store = TrajectoryStore(run_dir / "trajectories.sqlite")
    store.put_many(trajs, advantages=adv)  # INSERT OR REPLACE: a retried step never duplicates
    for t in store.iter(step=3, task_id="code-0-7"): ...
    store.truncate_after(step)             # on resume: drop steps newer than the checkpoint

A row keeps the summary columns for SQL queries plus the whole trajectory as JSON, so
`posttrain replay` can rebuild `Trajectory` objects and re-verify them. The `advantage`
column is the value the update used (NULL where it used none, and in runs written before
the column existed: it is added to an older database on open).
"""

from __future__ import annotations

import atexit
import json
import queue
import sqlite3
import threading
from pathlib import Path
from typing import Iterator, Sequence

from posttrain.errors import PosttrainError
from posttrain.types import ExecLimits, ExecResult, FileChange, ToolCall, TrajError, Trajectory, Turn, VerifyResult, thaw

SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
  kind TEXT NOT NULL DEFAULT 'train', step INTEGER NOT NULL, grp INTEGER NOT NULL, sample INTEGER NOT NULL,
  task_id TEXT NOT NULL, task_version TEXT NOT NULL, domain TEXT NOT NULL,
  reward REAL, passed INTEGER, status TEXT, weights_version INTEGER, finish_reason TEXT,
  error_boundary TEXT, data TEXT NOT NULL, advantage REAL,
  PRIMARY KEY (kind, step, grp, sample)
);
CREATE INDEX IF NOT EXISTS traj_task ON trajectories (task_id);
"""


def _turn_from(d: dict) -> Turn:
    tc = d.get("tool_call")
    er = d.get("exec_result")
    if er is not None:
        er = ExecResult(**{**er, "limits": ExecLimits(**er["limits"]),
                           "files_changed": tuple(FileChange(**f) for f in er["files_changed"])})
    return Turn(d["role"], d["text"], tuple(d["token_ids"]), tuple(d["logprobs"]), d["trainable"],
                ToolCall(**tc) if tc else None, er, d.get("wall_s", 0.0),
                tuple(d.get("token_versions", ())))


def traj_from_dict(d: dict) -> Trajectory:
    v = d.get("verify")
    e = d.get("error")
    return Trajectory(
        task_id=d["task_id"], task_version=d["task_version"], domain=d["domain"], prompt_ids=tuple(d["prompt_ids"]),
        turns=tuple(_turn_from(t) for t in d["turns"]), weights_version=d["weights_version"], reward=d["reward"],
        verify=VerifyResult(**v) if v else None, step=d["step"], group=d["group"], sample=d["sample"],
        finish_reason=d["finish_reason"], timings=d.get("timings", {}), error=TrajError(**e) if e else None,
    )


class StoreError(PosttrainError, RuntimeError):
    """A trajectory write failed (disk full, database locked): names the store and the cause."""


def _turn_dict(x: Turn) -> dict:
    return {"role": x.role, "text": x.text, "token_ids": list(x.token_ids), "logprobs": list(x.logprobs),
            "trainable": x.trainable, "tool_call": thaw(x.tool_call), "exec_result": thaw(x.exec_result),
            "wall_s": x.wall_s, "token_versions": list(x.token_versions)}


def traj_to_dict(t: Trajectory) -> dict:
    """`thaw(t)`, written out for the hot path: the store serialises every sample of every step,
    and the generic walk over dataclass fields cost ~15 us a sample (equal output: tested)."""
    return {"task_id": t.task_id, "task_version": t.task_version, "domain": t.domain, "prompt_ids": list(t.prompt_ids),
            "turns": [_turn_dict(x) for x in t.turns], "weights_version": t.weights_version, "reward": t.reward,
            "verify": thaw(t.verify), "step": t.step, "group": t.group, "sample": t.sample,
            "finish_reason": t.finish_reason, "timings": dict(t.timings), "error": thaw(t.error)}


class TrajectoryStore:
    """`background=True` (the RL loop) writes on a thread of its own: the serialisation and the
    commit (~3 ms a step) overlap the next step instead of adding to it. Every read, `flush()`
    and `close()` wait for the queued writes first, and a failed write is raised at the next
    call; the trainer flushes before each checkpoint, so a checkpoint never names a step whose
    trajectories are not on disk."""

    def __init__(self, path: str | Path, background: bool = False) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives a crash or kill of this process (not a power cut) and
        # skips the fsync per step that FULL pays (~1 ms a step on the RL hot path)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        if "advantage" not in {r[1] for r in self.db.execute("PRAGMA table_info(trajectories)")}:
            self.db.execute("ALTER TABLE trajectories ADD COLUMN advantage REAL")  # a run from before the column
        self._lock = threading.Lock()  # one user of the connection at a time
        self._error: BaseException | None = None
        self._queue: queue.Queue | None = None
        if background:
            self._queue = queue.Queue()
            threading.Thread(target=self._drain, name="trajectory-store", daemon=True).start()
            atexit.register(self.close)  # a caller that never closes still gets its queued writes on disk

    def put_many(self, trajs: Sequence[Trajectory], kind: str = "train",
                 advantages: Sequence[float | None] | None = None) -> None:
        """`advantages[i]`: the advantage trajs[i] was trained with (None: not trained on)."""
        advs = list(advantages) if advantages is not None else [None] * len(trajs)
        if len(advs) != len(trajs):
            raise ValueError(f"put_many: {len(advs)} advantages for {len(trajs)} trajectories")
        self._raise()
        if self._queue is None:
            self._write(list(trajs), kind, advs)
        else:
            self._queue.put((list(trajs), kind, advs))

    def _write(self, trajs: list[Trajectory], kind: str, advs: list[float | None]) -> None:
        rows = [(kind, t.step, t.group, t.sample, t.task_id, t.task_version, t.domain, t.reward,
                 int(bool(t.verify and t.verify.passed)), t.verify.status if t.verify else None, t.weights_version,
                 t.finish_reason, t.error.boundary if t.error else None, json.dumps(traj_to_dict(t)), a)
                for t, a in zip(trajs, advs)]
        with self._lock, self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO trajectories VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def advantages(self, step: int, kind: str = "train") -> dict[tuple[int, int], float | None]:
        """{(group, sample): stored advantage} of one step."""
        self.flush()
        with self._lock:
            rows = self.db.execute("SELECT grp, sample, advantage FROM trajectories WHERE kind = ? AND step = ?",
                                   (kind, step)).fetchall()
        return {(g, s): a for g, s, a in rows}

    def _drain(self) -> None:
        q = self._queue  # close() drops the attribute; the thread keeps its queue
        assert q is not None
        while True:
            item = q.get()
            try:
                if item is None:
                    return
                self._write(*item)
            except BaseException as e:  # noqa: BLE001 - handed to the caller at its next call
                self._error = e
            finally:
                q.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            e, self._error = self._error, None
            raise StoreError(f"writing trajectories to {self.path} failed: {type(e).__name__}: {e}") from e

    def flush(self) -> None:
        """Wait until every queued write is on disk; raise if one failed."""
        if self._queue is not None:
            self._queue.join()
        self._raise()

    def iter(self, step: int | None = None, task_id: str | None = None, kind: str = "train") -> Iterator[Trajectory]:
        self.flush()
        q, args = "SELECT data FROM trajectories WHERE kind = ?", [kind]
        if step is not None:
            q, args = q + " AND step = ?", args + [step]
        if task_id is not None:
            q, args = q + " AND task_id = ?", args + [task_id]
        with self._lock:
            rows = self.db.execute(q + " ORDER BY step, grp, sample", args).fetchall()
        for (data,) in rows:
            yield traj_from_dict(json.loads(data))

    def count(self, kind: str = "train") -> int:
        self.flush()
        return self.db.execute("SELECT COUNT(*) FROM trajectories WHERE kind = ?", (kind,)).fetchone()[0]

    def steps(self, kind: str = "train") -> list[int]:
        self.flush()
        return [r[0] for r in self.db.execute("SELECT DISTINCT step FROM trajectories WHERE kind = ? ORDER BY step", (kind,))]

    def truncate_after(self, step: int, kind: str = "train") -> None:
        self.flush()
        with self._lock, self.db:
            self.db.execute("DELETE FROM trajectories WHERE kind = ? AND step > ?", (kind, step))

    def close(self) -> None:
        """Flush and close; calling it again does nothing."""
        try:
            self.flush()
        finally:
            if self._queue is not None:
                self._queue.put(None)
                self._queue = None
                atexit.unregister(self.close)
            self.db.close()
