"""Evaluation results of a run, as the viewer (and report.html) show them.

    quickstart_eval(run)       # eval_before.json / eval_after.json (posttrain/eval/recipe_eval.py)
    suite_eval(run)            # an `posttrain eval` run directory: its summary.json
    compare_eval(run_a, run_b) # `posttrain compare` of two eval runs, flips with prompts
"""

from __future__ import annotations

import json
import math
from typing import Any

from posttrain.eval.recipe_eval import quickstart_eval as _before_after
from posttrain.eval.recipe_eval import read_json
from posttrain.view.runs import RunView


def quickstart_eval(run: RunView) -> dict[str, Any] | None:
    return _before_after(run.path, run.prompt)


def suite_eval(run: RunView) -> dict[str, Any] | None:
    """The summary of an eval run directory (samples.jsonl + summary.json), or None."""
    if not (run.path / "samples.jsonl").is_file():
        return None
    return {"kind": "suite", "summary": run.run.read_summary() or {}, "meta": read_json(run.path, "meta.json") or {}}


def _nan_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_nan_safe(v) for v in x]
    return x


def compare_eval(a: RunView, b: RunView) -> dict[str, Any] | None:
    """Paired comparison of two eval runs (posttrain.eval.compare) with each flip's prompt; None
    unless both are eval runs."""
    if not ((a.path / "samples.jsonl").is_file() and (b.path / "samples.jsonl").is_file()):
        return None
    from posttrain.eval.compare import compare_runs

    cmp = compare_runs(a.path, b.path)
    prompts = {ra.key: ra.prompt for ra, _ in cmp.pairs}
    out = cmp.to_dict()
    for d in out["domains"].values():
        for f in d["flips"]:
            f["prompt"] = prompts.get(f"{f['task_id']}@{f['task_version']}#{f['epoch']}", "")
    return _nan_safe(out)


def run_eval(run: RunView) -> dict[str, Any] | None:
    return quickstart_eval(run) or suite_eval(run)


def json_safe(x: Any) -> Any:
    """NaN and infinities as null: the browser's JSON.parse refuses them."""
    return _nan_safe(x)
