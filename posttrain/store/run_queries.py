"""Every read of a run's trajectories.sqlite: the viewer's pages, the reward curves, the
detectors' samples, whole trajectories for DPO pairs and postmortems. No SQL lives outside
posttrain/store (tests/unit/core/test_run_dir_owner.py).

    with RunDir(path).queries() as q:            # None before the store exists
        q.page(Filters(domain="code"), 0, 50)    # {"total", "rows": [...]} of one filtered page
        q.group("train", 3, 1)                   # a prompt's G samples with their advantages
        q.reward_moments("train")                # per-step reward count / mean / mean of squares
        q.scored_samples("train", min_step=0)    # what the reward-hacking detectors read
        list(q.trajectories(step=3))             # Trajectory objects

The advantage shown is the one the trainer used, stored with the sample (the `advantage`
column, whatever `rl.advantage` the run chose); None where the update used none and in
runs written before the column existed. Nothing here re-derives it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from posttrain.types import Trajectory

COLS = ("kind", "step", "grp", "sample", "task_id", "domain", "reward", "passed", "status", "weights_version",
        "finish_reason", "error_boundary")
# Created once per store when it is writable: the viewer's filters and curves run on them (a
# CREATE INDEX takes the write lock for a moment, never while a step commits for long).
INDEXES = (
    "CREATE INDEX IF NOT EXISTS view_kind_domain_step ON trajectories (kind, domain, step)",
    "CREATE INDEX IF NOT EXISTS view_kind_reward ON trajectories (kind, reward)",
    "CREATE INDEX IF NOT EXISTS view_kind_version ON trajectories (kind, weights_version)",
)
# the completion (assistant turns' text) extracted in SQLite's C JSON functions, not json.loads
_COMPLETION = ("(SELECT COALESCE(group_concat(json_extract(value, '$.text'), ''), '') FROM json_each(data, '$.turns') "
               "WHERE json_extract(value, '$.role') = 'assistant')")
_SCORED = "status IS NOT 'infra_error' AND reward IS NOT NULL"


@dataclass
class Filters:
    """Which rows a page holds; None: no filter on that column."""
    kind: str = "train"
    step_min: int | None = None
    step_max: int | None = None
    domain: str | None = None
    task_id: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    adv_min: float | None = None
    adv_max: float | None = None
    version: int | None = None
    status: str | None = None

    @classmethod
    def from_query(cls, q: dict[str, str]) -> "Filters":
        """From URL query parameters; empty strings mean 'no filter'."""
        out: dict[str, Any] = {}
        for f in fields(cls):
            raw = q.get(f.name)
            if raw in (None, ""):
                continue
            kind = f.type if isinstance(f.type, str) else str(f.type)
            out[f.name] = int(raw) if "int" in kind else float(raw) if "float" in kind else raw
        return cls(**out)


class ScoredSample(NamedTuple):
    """A scored (not infra-error) sample, as the reward-hacking detectors read it."""
    step: int
    grp: int
    task_id: str
    reward: float
    passed: int
    completion: str


class StatusRow(NamedTuple):
    """A sample's verifier outcome: status, error boundary and the verifier's rule (format, ...)."""
    step: int
    passed: int
    status: str | None
    boundary: str | None
    rule: str | None


class RewardMoment(NamedTuple):
    """Reward count, mean and mean of squares of one step's scored samples of one domain
    ("ALL": the domains pooled)."""
    step: int
    domain: str
    n: int
    mean: float
    mean_sq: float


def _completion(data: str) -> str:
    d = json.loads(data)
    return "".join(t["text"] for t in d["turns"] if t["role"] == "assistant")


def ensure_indexes(path: str | Path) -> bool:
    """The viewer's indexes on a store; False when the file cannot take them (read-only media,
    a busy writer): queries still answer, only without them."""
    try:
        con = sqlite3.connect(path, timeout=2.0)
        try:
            for sql in INDEXES:
                con.execute(sql)
            con.commit()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return True


class RunQueries:
    """Read queries over one trajectories.sqlite connection. One user at a time (the caller
    locks); each statement sees the newest commit (WAL, autocommit), so a kept-open instance
    follows a run that is still training."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self._adv: str | None = None

    @classmethod
    def open(cls, path: str | Path, shared: bool = False) -> "RunQueries | None":
        """A read-only connection to the store at `path`; None when there is none. `shared`:
        usable from threads other than the opening one (the viewer's worker threads)."""
        p = Path(path)
        if not p.is_file():
            return None
        return cls(sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=5.0, check_same_thread=not shared))

    def close(self) -> None:
        self.con.close()

    def stamp(self) -> tuple[int, int]:
        """(rows, newest rowid): changes with every write, insert, replace or truncation."""
        n, last = self.con.execute("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM trajectories").fetchone()
        return n, last

    # ---- the viewer -----------------------------------------------------------------
    def _adv_col(self) -> str:
        """The stored advantage, or NULL in a store written before the column existed."""
        if self._adv is None:
            has = any(r[1] == "advantage" for r in self.con.execute("PRAGMA table_info(trajectories)"))
            self._adv = "t.advantage" if has else "NULL"
        return self._adv

    def _filtered(self, f: Filters) -> tuple[str, list[Any]]:
        """A query of the matching rows with their stored `advantage`, and its arguments."""
        where, args = ["t.kind = ?"], [f.kind]
        adv = self._adv_col()
        conds = [("t.step", ">=", f.step_min), ("t.step", "<=", f.step_max), ("t.domain", "=", f.domain),
                 ("t.task_id", "=", f.task_id), ("t.weights_version", "=", f.version), ("t.reward", ">=", f.reward_min),
                 ("t.reward", "<=", f.reward_max), ("t.status", "=", f.status), (adv, ">=", f.adv_min),
                 (adv, "<=", f.adv_max)]
        for col, op, val in conds:
            if val is not None:
                where.append(f"{col} {op} ?")
                args.append(val)
        cols = ", ".join(f"t.{c}" for c in COLS)
        return f"SELECT {cols}, {adv} AS advantage FROM trajectories t WHERE {' AND '.join(where)}", args

    def _rows(self, sql: str, args: list[Any]) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def _data(self, kind: str, step: int, grp: int, sample: int) -> str | None:
        row = self.con.execute("SELECT data FROM trajectories WHERE kind=? AND step=? AND grp=? AND sample=?",
                               (kind, step, grp, sample)).fetchone()
        return row[0] if row else None

    def page(self, f: Filters, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """{"total": N, "rows": [...]} of one page, ordered by step, group, sample; each row carries
        a 120-character completion preview (read only for the page's rows)."""
        sql, args = self._filtered(f)
        total = self.con.execute(f"SELECT COUNT(*) FROM ({sql})", args).fetchone()[0]
        rows = self._rows(f"{sql} ORDER BY t.step, t.grp, t.sample LIMIT ? OFFSET ?", args + [limit, offset])
        for r in rows:
            data = self._data(r["kind"], r["step"], r["grp"], r["sample"])
            r["preview"] = _completion(data)[:120] if data else ""
        return {"total": total, "offset": offset, "limit": limit, "rows": rows}

    def trajectory(self, kind: str, step: int, grp: int, sample: int) -> dict[str, Any] | None:
        """The whole stored trajectory as JSON (turns with token ids and logprobs, tool calls,
        sandbox results, verifier details), plus the advantage it was trained with."""
        row = self.con.execute(f"SELECT data, {self._adv_col()} FROM trajectories t WHERE kind=? AND step=? AND grp=? "
                               "AND sample=?", (kind, step, grp, sample)).fetchone()
        if row is None:
            return None
        out = json.loads(row[0])
        out["advantage"] = row[1]
        return out

    def group(self, kind: str, step: int, grp: int) -> dict[str, Any]:
        """A prompt's G samples of one step, side by side: summary columns, advantage, completion."""
        sql, args = self._filtered(Filters(kind=kind, step_min=step, step_max=step))
        samples = self._rows(f"{sql} AND t.grp = ? ORDER BY t.sample", args + [grp])
        for s in samples:
            s["completion"] = _completion(self._data(kind, step, grp, s["sample"]) or '{"turns": []}')
        return {"step": step, "grp": grp, "task_id": samples[0]["task_id"] if samples else None, "samples": samples}

    def nearest_group(self, kind: str, task_id: str, step: int) -> tuple[int, int] | None:
        """(step, grp) of the task's group at the stored step nearest `step` (earlier on a tie)."""
        row = self.con.execute("SELECT step, grp FROM trajectories WHERE kind=? AND task_id=? "
                               "ORDER BY ABS(step - ?), step LIMIT 1", (kind, task_id, step)).fetchone()
        return (row[0], row[1]) if row else None

    def facets(self, kind: str = "train") -> dict[str, Any]:
        """What the filter controls offer: domains, step and version ranges, statuses, kinds."""
        dom = [r[0] for r in self.con.execute("SELECT DISTINCT domain FROM trajectories WHERE kind=? ORDER BY domain",
                                              (kind,))]
        lo, hi, vlo, vhi, n = self.con.execute("SELECT MIN(step), MAX(step), MIN(weights_version), "
                                               "MAX(weights_version), COUNT(*) FROM trajectories WHERE kind=?",
                                               (kind,)).fetchone()
        kinds = [r[0] for r in self.con.execute("SELECT DISTINCT kind FROM trajectories")]
        st = [r[0] for r in self.con.execute("SELECT DISTINCT status FROM trajectories WHERE kind=?", (kind,)) if r[0]]
        return {"domains": dom, "steps": [lo, hi], "versions": [vlo, vhi], "count": n, "kinds": kinds, "statuses": st}

    def counts_by_step(self, kind: str = "train") -> dict[int, int]:
        """{step: stored samples}."""
        return dict(self.con.execute("SELECT step, COUNT(*) FROM trajectories WHERE kind = ? GROUP BY step", (kind,)))

    # ---- reward curves ----------------------------------------------------------------
    def reward_range(self, kind: str = "train") -> tuple[float | None, float | None]:
        """(min, max) reward of the non-infra-error samples; (None, None) when there are none."""
        lo, hi = self.con.execute("SELECT MIN(reward), MAX(reward) FROM trajectories WHERE kind = ? "
                                  "AND status IS NOT 'infra_error'", (kind,)).fetchone()
        return lo, hi

    def reward_moments(self, kind: str = "train") -> list[RewardMoment]:
        """Per step and domain, then per step over all domains ("ALL"): the scored samples'
        reward count, mean and mean of squares, ordered by step."""
        q = ("SELECT step, {d}, COUNT(reward), AVG(reward), AVG(reward * reward) FROM trajectories "
             f"WHERE kind = ? AND {_SCORED} GROUP BY step{{g}} ORDER BY step")
        return [RewardMoment(*r) for sql in (q.format(d="domain", g=", domain"), q.format(d="'ALL'", g=""))
                for r in self.con.execute(sql, (kind,))]

    # ---- the reward-hacking detectors ----------------------------------------------------
    def scored_samples(self, kind: str = "train", min_step: int = 0) -> list[ScoredSample]:
        """Every scored sample of steps >= min_step, with its completion text."""
        rows = self.con.execute(f"SELECT step, grp, task_id, reward, passed, {_COMPLETION} FROM trajectories "
                                f"WHERE kind = ? AND step >= ? AND {_SCORED}", (kind, min_step))
        return [ScoredSample(*r) for r in rows]

    def status_rows(self, kind: str = "train", min_step: int = 0) -> list[StatusRow]:
        """Every sample of steps >= min_step (infra errors included) with its verifier outcome."""
        rows = self.con.execute("SELECT step, passed, status, error_boundary, json_extract(data, '$.verify.details.rule') "
                                "FROM trajectories WHERE kind = ? AND step >= ?", (kind, min_step))
        return [StatusRow(*r) for r in rows]

    # ---- whole trajectories -------------------------------------------------------------
    def trajectories(self, step: int | None = None, task_id: str | None = None,
                     kind: str = "train") -> Iterator[Trajectory]:
        """The stored Trajectory objects, by step, group, sample (all steps and tasks by default)."""
        from posttrain.store.trajectories import traj_from_dict

        q, args = "SELECT data FROM trajectories WHERE kind = ?", [kind]
        if step is not None:
            q, args = q + " AND step = ?", args + [step]
        if task_id is not None:
            q, args = q + " AND task_id = ?", args + [task_id]
        for (data,) in self.con.execute(q + " ORDER BY step, grp, sample", args).fetchall():
            yield traj_from_dict(json.loads(data))


def as_queries(db: "RunQueries | sqlite3.Connection") -> RunQueries:
    """RunQueries over `db`: itself, or a wrapper of a bare connection (older callers and tests
    that build a store by hand)."""
    return db if isinstance(db, RunQueries) else RunQueries(db)
