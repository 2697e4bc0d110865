"""Verifier flakiness: re-score stored outputs N times and report disagreement per task.

    flakes = await reverify_run(Path("runs/eval-x"), n=3, sandbox=pool)
    flakes["tasks"]["code-4"]["flake_rate"]     # share of its samples whose verdicts disagreed

A multi-step sample is re-scored by replaying its episode in a fresh sandbox session
(`episodes.py`), since its verdict reads the final state of a session that no longer exists.
Each re-score uses a fresh `VerifierRunner`, so the runner's answer cache cannot hide a
flaky verifier. A sample is flaky when its N re-scores plus the stored score do not all
agree on (passed, score). Infra errors in a re-score are counted apart (`infra`), not as
disagreement: an outage is not flakiness of the verdict.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

from posttrain.eval.episodes import load_tokenizer, rescore
from posttrain.eval.records import SAMPLES_FILE, EvalError, RecordFile, read_json, write_json_atomic
from posttrain.eval.suite import load_suite
from posttrain.eval.trajio import trajectory_from_dict
from posttrain.types import Task, is_multi_step

REVERIFY_FILE = "reverify.json"


def _suite_tasks(run_dir: Path) -> dict[str, Task]:
    meta = read_json(run_dir / "meta.json", "run metadata")
    return {t.id: t for t in load_suite(meta["suite_path"]).tasks}


async def reverify_run(run_dir: Path, n: int, sandbox: Any = None, concurrency: int = 2) -> dict[str, Any]:
    from posttrain.verifiers.run import VerifierRunner

    if n < 1:
        raise EvalError(f"--reverify must be >= 1, got {n}")
    tasks = _suite_tasks(run_dir)
    recs = [r for r in RecordFile(run_dir / SAMPLES_FILE).load().values() if r.trajectory and not r.infra_error]
    sem = asyncio.Semaphore(concurrency)
    tok = None
    if any(is_multi_step(t) for t in tasks.values()):  # episodes are replayed: the tokenizer rebuilds them
        tok = load_tokenizer(read_json(run_dir / "meta.json", "run metadata")["model"])

    async def rescore_sample(rec: Any) -> tuple[Any, list[tuple[bool, float] | None]]:
        task = tasks.get(rec.task_id)
        if task is None or task.version != rec.task_version:
            raise EvalError(f"{run_dir}: sample {rec.key} is not a task of the run's suite any more")
        traj = trajectory_from_dict(rec.trajectory)
        out: list[tuple[bool, float] | None] = []
        for _ in range(n):
            async with sem:
                res = await rescore(task, traj, sandbox, VerifierRunner(sandbox, concurrency=1, retries=0), tok)
            out.append(None if res.infra_error else (bool(res.verify.passed), float(res.verify.score)))
        return rec, out

    results = await asyncio.gather(*(rescore_sample(r) for r in recs))
    per_task: dict[str, dict[str, Any]] = defaultdict(lambda: {"samples": 0, "flaky": 0, "infra": 0})
    for rec, outs in results:
        row = per_task[rec.task_id]
        row["samples"] += 1
        row["infra"] += sum(o is None for o in outs)
        verdicts = {(rec.passed, rec.score)} | {o for o in outs if o is not None}
        row["flaky"] += len(verdicts) > 1
    for row in per_task.values():
        row["flake_rate"] = row["flaky"] / row["samples"]
    total = sum(r["samples"] for r in per_task.values())
    flaky = sum(r["flaky"] for r in per_task.values())
    report = {"n": n, "samples": total, "flaky_samples": flaky, "flake_rate": flaky / total if total else 0.0,
              "tasks": dict(sorted(per_task.items()))}
    write_json_atomic(run_dir / REVERIFY_FILE, report)
    return report
