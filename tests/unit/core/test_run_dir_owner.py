"""posttrain/store owns the run directory: no other module runs SQL, imports sqlite3, or spells
a run directory's file names; they go through store/run.py (RunDir and its name constants)
and store/run_queries.py (RunQueries).

Read with `ast`, so docstrings and comments may name the files (they explain them); string
constants in code, help texts and error messages included, may not (an f-string with the
constant reads the same to a user). Exceptions: ALLOWED, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "posttrain"
OWNER = PKG / "store"

# a run directory's names as whole words ("agent_summary.json" is not "summary.json")
NAMES = re.compile(r"(?<![\w-])(metrics\.jsonl|summary\.json|config\.yaml|trajectories\.sqlite|report\.html"
                   r"|eval_before\.json|eval_after\.json|scheduler\.png|base-model|sft-model)(?![\w-])"
                   r"|^checkpoints$|(?<![\w.])(dcp-)?step-(\*|\(|$)")
SQL_CALLS = {"execute", "executemany", "executescript"}

# (path under posttrain/, what it may contain): why
ALLOWED = {
    ("eval/cache.py", "sqlite3"): "the generation cache is its own database (eval/cache.py's docstring), not a run's "
                                  "trajectories.sqlite",
    ("eval/cache.py", ".execute("): "the generation cache's own database, as above",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _findings(path: Path) -> list[tuple[int, str]]:
    """(line, what) of each use of sqlite3, of a SQL call, and of a run-directory file name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docs, out = _docstrings(tree), []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import) and any(a.name.split(".")[0] == "sqlite3" for a in n.names):
            out.append((n.lineno, "sqlite3"))
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "sqlite3":
            out.append((n.lineno, "sqlite3"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SQL_CALLS:
            out.append((n.lineno, ".execute("))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and NAMES.search(n.value):
            out.append((n.lineno, f"file name {NAMES.search(n.value).group(0)!r}"))
    return out


def _violations() -> list[str]:
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        if OWNER in f.parents:
            continue
        rel = f.relative_to(PKG).as_posix()
        for line, what in _findings(f):
            key = "file name" if what.startswith("file name") else what
            if (rel, key) not in ALLOWED:
                bad.append(f"posttrain/{rel}:{line}: {what} (use posttrain/store/run.py or run_queries.py)")
    return bad


def test_no_module_outside_store_runs_sql_or_spells_a_run_file_name():
    assert _violations() == []


def test_every_allowance_is_still_needed():
    used = {(f.relative_to(PKG).as_posix(), "file name" if w.startswith("file name") else w)
            for f in PKG.rglob("*.py") if OWNER not in f.parents for _, w in _findings(f)}
    assert set(ALLOWED) <= used, f"stale allowances: {sorted(set(ALLOWED) - used)}"


def test_the_scan_sees_a_raw_query(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('import sqlite3\n\ndef f(db):\n    """Reads trajectories.sqlite."""\n'
                 '    return db.execute("SELECT 1"), "x/summary.json"\n')
    assert [w for _, w in _findings(f)] == ["sqlite3", ".execute(", "file name 'summary.json'"]


def test_the_scan_ignores_docstrings_and_longer_names(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Writes metrics.jsonl and config.yaml."""\nNAME = "agent_summary.json"\n')
    assert _findings(f) == []
