"""Replay: re-verify stored trajectories with today's verifiers and show what changed.

    diffs = await replay_run(Path("runs/rl-1"), step=40, task_id="code-3", sandbox=pool)
    [d for d in diffs if d.changed]

Sources, in order: a training run's `trajectories.sqlite` (through
`posttrain.store.trajectories.TrajectoryStore`), else an evaluation run's
`samples.jsonl`. Tasks are found by version: an evaluation run's suite, the task files
and domains named in a training run's `config.yaml` (train split at `seed`, held-out at
`tasks.eval_seed`). A trajectory whose task version cannot be found is reported as
such, never silently skipped. A multi-step trajectory is replayed, not just re-verified:
its recorded turns run again through the agent loop in a fresh sandbox session (its
verdict reads the session's final state), with the run's tokenizer (`episodes.py`).

Tasks are found among the ones the run saved (every curriculum level's included: task ids of a
multi-level domain end in `@L<level>`, tasks/splits.py), so a curriculum run replays whole
(tests/integration/test_cli_curriculum.py).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from posttrain.eval.episodes import load_tokenizer, rescore
from posttrain.eval.records import SAMPLES_FILE, EvalError, RecordFile, read_json
from posttrain.eval.trajio import trajectory_from_dict
from posttrain.store.run import TRAJECTORIES, RunDir
from posttrain.types import Task, Trajectory, is_multi_step, thaw


@dataclass
class ReplayDiff:
    task_id: str
    task_version: str
    step: int
    sample: int
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    note: str = ""
    changed_fields: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changed_fields) or bool(self.note)


def _verdict(traj: Trajectory) -> dict[str, Any] | None:
    v = traj.verify
    return None if v is None else {"score": v.score, "passed": v.passed, "status": v.status, "reason": v.reason,
                                   "details": thaw(v.details)}


def _load_trajectories(run: Path, step: int | None, task_id: str | None) -> list[Trajectory]:
    with RunDir(run).queries() as q:  # read-only: replaying never writes to the run
        if q is not None:
            return list(q.trajectories(step=step, task_id=task_id))
    if (run / SAMPLES_FILE).is_file():
        recs = RecordFile(run / SAMPLES_FILE).load(repair=False).values()
        trajs = [trajectory_from_dict(r.trajectory) for r in recs if r.trajectory
                 and (task_id is None or r.task_id == task_id)]
        return [t for t in trajs if step is None or t.step == step]
    raise EvalError(f"{run}: no {TRAJECTORIES} (training run) or {SAMPLES_FILE} (evaluation run) to replay")


def _config_tasks(run: Path) -> Iterable[Task]:
    from posttrain.config import load_config
    from posttrain.config_check import load_plugins
    from posttrain.tasks.io import load_tasks
    from posttrain.tasks.splits import make_splits

    cfg = load_config(RunDir(run).config)
    load_plugins(cfg.plugins)  # pinned or not, the run's plugin verifiers must be registered to re-verify
    pinned = sorted(RunDir(run).tasks.glob("*.jsonl"))
    if pinned:  # training runs pin their exact task sets
        for f in pinned:
            yield from load_tasks(f, allow_empty=True)  # a run's own pinned split (sft.jsonl may be empty)
        return
    sp = make_splits(cfg)  # a run that pinned nothing: rebuild its splits the way it built them
    yield from sp.train + sp.held_out


def task_index(run: Path) -> dict[str, Task]:
    """task version -> Task, from whatever the run directory says its tasks were."""
    out: dict[str, Task] = {}
    if (run / "meta.json").is_file():
        from posttrain.eval.suite import load_suite

        out.update({t.version: t for t in load_suite(read_json(run / "meta.json", "run metadata")["suite_path"]).tasks})
    if RunDir(run).is_run():
        out.update({t.version: t for t in _config_tasks(run)})
    return out


def _run_tokenizer(run: Path) -> Any:
    """The tokenizer of the model that produced the run: an evaluation's model, else the newest checkpoint."""
    from posttrain.eval.modelref import resolve_model

    meta = run / "meta.json"
    model = read_json(meta, "run metadata")["model"] if meta.is_file() else resolve_model(run).path
    return load_tokenizer(model)


async def replay_run(run: Path, step: int | None = None, task_id: str | None = None, sandbox: Any = None,
                     concurrency: int = 2) -> list[ReplayDiff]:
    from posttrain.verifiers.run import VerifierRunner

    if not run.is_dir():
        raise EvalError(f"run directory not found: {run}")
    trajs = _load_trajectories(run, step, task_id)
    if not trajs:
        raise EvalError(f"{run}: no stored trajectories match step={step} task={task_id}")
    tasks = task_index(run)
    runner = VerifierRunner(sandbox, concurrency=concurrency)
    multi = any(is_multi_step(t) for t in (tasks.get(tr.task_version) for tr in trajs) if t is not None)
    tok = _run_tokenizer(run) if multi else None  # episodes are replayed turn by turn: needs the tokenizer

    async def one(t: Trajectory) -> ReplayDiff:
        old = _verdict(t)
        task = tasks.get(t.task_version)
        if task is None:
            return ReplayDiff(t.task_id, t.task_version, t.step, t.sample, old, None,
                              note="task version not found in the run's suite/config; cannot re-verify")
        new = _verdict(await rescore(task, t, sandbox, runner, tok))
        changed = [k for k in ("passed", "score", "status", "reason", "details") if (old or {}).get(k) != (new or {}).get(k)]
        return ReplayDiff(t.task_id, t.task_version, t.step, t.sample, old, new, changed_fields=changed)

    return list(await asyncio.gather(*(one(t) for t in trajs)))


def diff_lines(diffs: list[ReplayDiff], show_all: bool = False) -> list[str]:
    """One line per trajectory (changed only unless show_all), then the changed fields."""
    out = []
    for d in diffs:
        if not (d.changed or show_all):
            continue
        head = f"{d.task_id} step {d.step} sample {d.sample}: "
        if d.note:
            out.append(head + d.note)
            continue
        if not d.changed_fields:
            out.append(head + "unchanged")
            continue
        out.append(head + ", ".join(d.changed_fields))
        for k in d.changed_fields:
            a, b = (d.old or {}).get(k), (d.new or {}).get(k)
            out.append(f"    {k}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}")
    return out
