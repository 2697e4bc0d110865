"""SQL over a run's trajectory store: filtered pages, one trajectory, one group (the reward
curves, shared with report.html, are posttrain/eval/run_data.py).

    page = list_trajectories(db, Filters(domain="code", reward_min=0.5), offset=0, limit=50)
    group = group_samples(db, "train", 3, 1)     # a prompt's G samples with their advantages
    one = trajectory(db, "train", 3, 1, 0)       # kind, step, group, sample

The advantage shown is the one the trainer used, stored with the sample (the store's
`advantage` column, whatever `rl.advantage` the run chose); None where the update used
none (an infra error, a dropped group) and in runs written before the column existed.
Nothing here re-derives it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, fields
from typing import Any

COLS = "kind, step, grp, sample, task_id, domain, reward, passed, status, weights_version, finish_reason, error_boundary"


@dataclass
class Filters:
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


def _where(f: Filters, with_reward: bool) -> tuple[list[str], list[Any]]:
    where, args = ["t.kind = ?"], [f.kind]
    conds = [("step", ">=", f.step_min), ("step", "<=", f.step_max), ("domain", "=", f.domain),
             ("task_id", "=", f.task_id), ("weights_version", "=", f.version)]
    if with_reward:
        conds += [("reward", ">=", f.reward_min), ("reward", "<=", f.reward_max), ("status", "=", f.status)]
    for col, op, val in conds:
        if val is not None:
            where.append(f"t.{col} {op} ?")
            args.append(val)
    return where, args


def _adv_col(db: sqlite3.Connection) -> str:
    """The stored advantage, or NULL in a store written before the column existed."""
    has = any(r[1] == "advantage" for r in db.execute("PRAGMA table_info(trajectories)"))
    return "t.advantage" if has else "NULL"


def _filtered(db: sqlite3.Connection, f: Filters) -> tuple[str, list[Any]]:
    """A query of the matching rows with their stored `advantage`, and its arguments."""
    where, args = _where(f, with_reward=True)
    cols = ", ".join(f"t.{c.strip()}" for c in COLS.split(","))
    adv = _adv_col(db)
    for op, val in ((">=", f.adv_min), ("<=", f.adv_max)):
        if val is not None:
            where.append(f"{adv} {op} ?")
            args.append(val)
    return f"SELECT {cols}, {adv} AS advantage FROM trajectories t WHERE {' AND '.join(where)}", args


def _row(cur: sqlite3.Cursor, r: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cur.description, r)}


def _completion(data: str) -> str:
    d = json.loads(data)
    return "".join(t["text"] for t in d["turns"] if t["role"] == "assistant")


def list_trajectories(db: sqlite3.Connection, f: Filters, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """{"total": N, "rows": [...]} of one page, ordered by step, group, sample; each row carries a
    120-character completion preview (read only for the page's rows)."""
    sql, args = _filtered(db, f)
    total = db.execute(f"SELECT COUNT(*) FROM ({sql})", args).fetchone()[0]
    cur = db.execute(f"{sql} ORDER BY t.step, t.grp, t.sample LIMIT ? OFFSET ?", args + [limit, offset])
    rows = [_row(cur, r) for r in cur.fetchall()]
    for r in rows:
        data = db.execute("SELECT data FROM trajectories WHERE kind=? AND step=? AND grp=? AND sample=?",
                          (r["kind"], r["step"], r["grp"], r["sample"])).fetchone()
        r["preview"] = _completion(data[0])[:120] if data else ""
    return {"total": total, "offset": offset, "limit": limit, "rows": rows}


def trajectory(db: sqlite3.Connection, kind: str, step: int, grp: int, sample: int) -> dict[str, Any] | None:
    """The whole stored trajectory (turns with token ids and logprobs, tool calls, sandbox
    results, verifier details), plus the advantage it was trained with."""
    row = db.execute(f"SELECT data, {_adv_col(db)} FROM trajectories t WHERE kind=? AND step=? AND grp=? AND sample=?",
                     (kind, step, grp, sample)).fetchone()
    if row is None:
        return None
    out = json.loads(row[0])
    out["advantage"] = row[1]
    return out


def group_samples(db: sqlite3.Connection, kind: str, step: int, grp: int) -> dict[str, Any]:
    """A prompt's G samples of one step, side by side: summary columns, advantage, completion."""
    sql, args = _filtered(db, Filters(kind=kind, step_min=step, step_max=step))
    cur = db.execute(f"{sql} AND t.grp = ? ORDER BY t.sample", args + [grp])
    samples = [_row(cur, r) for r in cur.fetchall()]
    for s in samples:
        data = db.execute("SELECT data FROM trajectories WHERE kind=? AND step=? AND grp=? AND sample=?",
                          (kind, step, grp, s["sample"])).fetchone()
        s["completion"] = _completion(data[0])
    return {"step": step, "grp": grp, "task_id": samples[0]["task_id"] if samples else None, "samples": samples}


def facets(db: sqlite3.Connection, kind: str = "train") -> dict[str, Any]:
    """What the filter controls offer: domains, step and version ranges, statuses, kinds."""
    dom = [r[0] for r in db.execute("SELECT DISTINCT domain FROM trajectories WHERE kind=? ORDER BY domain", (kind,))]
    lo, hi, vlo, vhi, n = db.execute("SELECT MIN(step), MAX(step), MIN(weights_version), MAX(weights_version), "
                                     "COUNT(*) FROM trajectories WHERE kind=?", (kind,)).fetchone()
    kinds = [r[0] for r in db.execute("SELECT DISTINCT kind FROM trajectories")]
    st = [r[0] for r in db.execute("SELECT DISTINCT status FROM trajectories WHERE kind=?", (kind,)) if r[0]]
    return {"domains": dom, "steps": [lo, hi], "versions": [vlo, vhi], "count": n, "kinds": kinds, "statuses": st}
