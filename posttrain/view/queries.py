"""SQL over a run's trajectory store: filtered pages, one trajectory, one group (the reward
curves, shared with report.html, are posttrain/eval/run_data.py).

    page = list_trajectories(db, Filters(domain="code", reward_min=0.5), offset=0, limit=50)
    group = group_samples(db, "train", 3, 1)     # a prompt's G samples with their advantages
    one = trajectory(db, "train", 3, 1, 0)       # kind, step, group, sample

Advantages are not stored: they are recomputed here from the stored rewards, group-relative
over the group's scored (non infra-error) samples, as `group_norm` ((r - mean) / (unbiased
std + 1e-6), equal to train/advantages.py: tested) or `group_mean` (r - mean), whichever `rl.advantage` the run used (others are
shown as group_norm). Step, domain and weights version filter before the grouping
(every sample of a group shares them); reward and advantage filter after it. Without an
advantage filter a page costs an indexed scan plus one small query per group shown.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, fields
from typing import Any

COLS = "kind, step, grp, sample, task_id, domain, reward, passed, status, weights_version, finish_reason, error_boundary"
EPS = 1e-6


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


def _group_stats(f: Filters) -> tuple[str, list[Any]]:
    """Per (step, grp): mean and variance of the scored rewards, over the group-invariant filters."""
    where, args = _where(f, with_reward=False)
    return (f"SELECT t.step AS step, t.grp AS grp, AVG(CASE WHEN t.status IS NOT 'infra_error' THEN t.reward END) AS m, "
            f"AVG(CASE WHEN t.status IS NOT 'infra_error' THEN t.reward * t.reward END) AS m2, "
            f"COUNT(CASE WHEN t.status IS NOT 'infra_error' THEN t.reward END) AS n FROM trajectories t "
            f"WHERE {' AND '.join(where)} GROUP BY t.step, t.grp"), args


def _adv_expr(method: str, with_std: bool = False) -> str:
    centred = "(t.reward - g.m)"
    if method == "group_mean":
        return f"CASE WHEN t.status = 'infra_error' THEN 0.0 ELSE {centred} END"
    # unbiased, as TRL; a groups table carries it precomputed as `s`
    std = "g.s" if with_std else "CASE WHEN g.n > 1 THEN sqrt((g.m2 - g.m * g.m) * g.n / (g.n - 1)) ELSE 0.0 END"
    return f"CASE WHEN t.status = 'infra_error' OR g.n < 2 THEN 0.0 ELSE {centred} / ({std} + {EPS}) END"


def _filtered(f: Filters, method: str, groups: str | None = None) -> tuple[str, list[Any]]:
    """A query of the matching rows with an `advantage` column, and its arguments. Without an
    advantage filter the rows come straight from the indexed table (the page's advantages are
    added afterwards, `_add_advantages`); with one, every group's statistics are joined in."""
    where, args = _where(f, with_reward=True)
    cols = ", ".join(f"t.{c.strip()}" for c in COLS.split(","))
    if f.adv_min is None and f.adv_max is None:
        return f"SELECT {cols}, NULL AS advantage FROM trajectories t WHERE {' AND '.join(where)}", args
    stats, sargs = (f"SELECT * FROM {groups} WHERE kind = ?", [f.kind]) if groups else _group_stats(f)
    adv = _adv_expr(method, with_std=groups is not None)
    for op, val in ((">=", f.adv_min), ("<=", f.adv_max)):
        if val is not None:
            where.append(f"{adv} {op} ?")
            args.append(val)
    return (f"SELECT {cols}, {adv} AS advantage FROM trajectories t JOIN ({stats}) g "
            f"ON g.step = t.step AND g.grp = t.grp WHERE {' AND '.join(where)}"), sargs + args


def _add_advantages(db: sqlite3.Connection, rows: list[dict[str, Any]], kind: str, method: str) -> None:
    """Fill `advantage` of rows that lack it, one GROUP BY over just their groups."""
    need = sorted({(r["step"], r["grp"]) for r in rows if r.get("advantage") is None})
    if not need:
        return
    stats: dict[tuple[int, int], tuple] = {}
    for step, grp in need:
        stats[(step, grp)] = db.execute(
            "SELECT AVG(CASE WHEN status IS NOT 'infra_error' THEN reward END), "
            "AVG(CASE WHEN status IS NOT 'infra_error' THEN reward * reward END), "
            "COUNT(CASE WHEN status IS NOT 'infra_error' THEN reward END) FROM trajectories "
            "WHERE kind = ? AND step = ? AND grp = ?", (kind, step, grp)).fetchone()
    for r in rows:
        if r.get("advantage") is not None:
            continue
        m, m2, n = stats[(r["step"], r["grp"])]
        if r["status"] == "infra_error" or n < 2 or r["reward"] is None:
            r["advantage"] = 0.0  # as estimate_advantages: no baseline without two scored samples
        elif method == "group_mean":
            r["advantage"] = r["reward"] - m
        else:
            r["advantage"] = (r["reward"] - m) / (max(0.0, (m2 - m * m) * n / (n - 1)) ** 0.5 + EPS)


def _row(cur: sqlite3.Cursor, r: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cur.description, r)}


def _completion(data: str) -> str:
    d = json.loads(data)
    return "".join(t["text"] for t in d["turns"] if t["role"] == "assistant")


def list_trajectories(db: sqlite3.Connection, f: Filters, offset: int = 0, limit: int = 50,
                      method: str = "group_norm", groups: str | None = None) -> dict[str, Any]:
    """{"total": N, "rows": [...]} of one page, ordered by step, group, sample; each row carries a
    120-character completion preview (read only for the page's rows). `groups` names a table
    of per-group statistics (RunView.group_table) for the advantage filter to join."""
    sql, args = _filtered(f, method, groups)
    total = db.execute(f"SELECT COUNT(*) FROM ({sql})", args).fetchone()[0]
    cur = db.execute(f"{sql} ORDER BY t.step, t.grp, t.sample LIMIT ? OFFSET ?", args + [limit, offset])
    rows = [_row(cur, r) for r in cur.fetchall()]
    _add_advantages(db, rows, f.kind, method)
    for r in rows:
        data = db.execute("SELECT data FROM trajectories WHERE kind=? AND step=? AND grp=? AND sample=?",
                          (r["kind"], r["step"], r["grp"], r["sample"])).fetchone()
        r["preview"] = _completion(data[0])[:120] if data else ""
    return {"total": total, "offset": offset, "limit": limit, "rows": rows}


def trajectory(db: sqlite3.Connection, kind: str, step: int, grp: int, sample: int,
               method: str = "group_norm") -> dict[str, Any] | None:
    """The whole stored trajectory (turns with token ids and logprobs, tool calls, sandbox
    results, verifier details), plus its recomputed advantage."""
    row = db.execute("SELECT data FROM trajectories WHERE kind=? AND step=? AND grp=? AND sample=?",
                     (kind, step, grp, sample)).fetchone()
    if row is None:
        return None
    out = json.loads(row[0])
    g = group_samples(db, kind, step, grp, method)
    out["advantage"] = next((s["advantage"] for s in g["samples"] if s["sample"] == sample), None)
    return out


def group_samples(db: sqlite3.Connection, kind: str, step: int, grp: int, method: str = "group_norm") -> dict[str, Any]:
    """A prompt's G samples of one step, side by side: summary columns, advantage, completion."""
    sql, args = _filtered(Filters(kind=kind, step_min=step, step_max=step), method)
    cur = db.execute(f"{sql} AND t.grp = ? ORDER BY t.sample", args + [grp])
    samples = [_row(cur, r) for r in cur.fetchall()]
    _add_advantages(db, samples, kind, method)
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
