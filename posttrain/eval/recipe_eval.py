"""A recipe run's before/after evaluation (eval_before.json, eval_after.json) as a table.

    table = quickstart_eval(run_dir, prompt=lambda task_id: ...)
    table["rows"]    # per domain and ALL: pass@1 before/after with 95% Wilson intervals,
                     # flips each way, exact McNemar p-value
    table["flips"]   # task id, direction, prompt, both completions (when the run saved them)

Wilson intervals stay inside [0, 1] for the small held-out splits; the paired test is the
exact McNemar the quickstart's summary uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from posttrain.eval.stats import mcnemar_exact, wilson
from posttrain.store.run import RunDir


def read_json(run_dir: Path, name: str) -> dict[str, Any] | None:
    p = Path(run_dir) / name
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except ValueError:
        return None


def quickstart_eval(run_dir: Path, prompt: Callable[[str], str] = lambda task_id: "") -> dict[str, Any] | None:
    """Before/after table of a recipe run; None when it has no eval_before.json."""
    run = RunDir(run_dir)
    before, after = read_json(run_dir, run.eval_result("before").name), read_json(run_dir, run.eval_result("after").name)
    if before is None:
        return None
    after = after or {"passed": {}, "domain_of": {}}
    dom = before["domain_of"]
    rows, flips = [], []
    for d in sorted(set(dom.values())) + ["ALL"]:
        ids = [t for t in before["passed"] if d == "ALL" or dom[t] == d]
        common = [t for t in ids if t in after["passed"]]
        kb, ka = sum(bool(before["passed"][t]) for t in ids), sum(bool(after["passed"][t]) for t in common)
        b = sum(before["passed"][t] and not after["passed"][t] for t in common)
        c = sum(after["passed"][t] and not before["passed"][t] for t in common)
        rows.append({"domain": d, "n": len(ids), "before": kb / len(ids) if ids else float("nan"),
                     "before_ci": wilson(kb, len(ids)), "after": ka / len(common) if common else float("nan"),
                     "after_ci": wilson(ka, len(common)), "pass_to_fail": b, "fail_to_pass": c,
                     "p_value": mcnemar_exact(b, c) if common else float("nan")})
    comp_b, comp_a = before.get("completions", {}), after.get("completions", {})
    for t in sorted(before["passed"]):
        if t in after["passed"] and bool(before["passed"][t]) != bool(after["passed"][t]):
            flips.append({"task_id": t, "domain": dom[t], "prompt": prompt(t),
                          "direction": "pass->fail" if before["passed"][t] else "fail->pass",
                          "completion_a": comp_b.get(t, ""), "completion_b": comp_a.get(t, "")})
    return {"kind": "before_after", "labels": ["before RL", "after RL"], "rows": rows, "flips": flips}
