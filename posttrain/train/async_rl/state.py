"""In-flight batches in a checkpoint, and back: the lossless resume of the asynchronous loop.

    extra = {"async": pipeline_state(pipe)}        # saved with the trainer state
    regenerated = restore(pipe, st, st.async_state, floor)

A checkpoint after step c holds the scheduler state as of the last batch issued (c+K+1),
so the batches c+1..c+K+1 it had issued are saved with it: their task ids, the weights
version each is pinned to, and, when generated, their samples with those versions. On
resume they are re-issued as they were and the scheduler is not asked for them again, so
no issued prompt is skipped or drawn twice. A saved batch with samples is reused (the
trainer still checks its staleness before training on it); one without samples is
generated again with the oldest weights the resumed process has (the checkpoint's), which
is fresher than its pin, so within K; both are counted.

A periodic checkpoint first waits for the batches pinned to versions older than the
checkpoint's weights (those cannot be regenerated exactly after a resume), so a run resumed
from one reproduces the uninterrupted run; an interrupt (Ctrl-C) saves at once with
whatever was generated.
"""

from __future__ import annotations

from typing import Any

from posttrain.errors import PosttrainError
from posttrain.store.trajectories import traj_from_dict, traj_to_dict


def pipeline_state(pipe: Any, last_step: int) -> dict[str, Any]:
    """The issued, unconsumed batches up to `last_step`, samples included where generated."""
    out = []
    for s in sorted(pipe.batches):
        b = pipe.batches[s]
        if s > last_step:
            continue
        trajs = b.trajs
        out.append({"step": s, "task_ids": [t.id for t in b.tasks], "version": b.version,
                    "trajs": None if trajs is None else [traj_to_dict(t) for t in trajs],
                    "generate_s": b.generate_s, "verify_s": b.verify_s})
    return {"max_staleness": pipe.k, "batches": out}


def restore(pipe: Any, st: Any, saved: dict[str, Any] | None, floor: int) -> tuple[int, int]:
    """Re-issue the saved batches from step st.step on; returns (reused, regenerated) counts."""
    if not saved:
        return 0, 0
    by_id = {t.id: t for t in st.train_tasks}
    reused = regen = 0
    for rec in saved["batches"]:
        if rec["step"] < st.step:
            continue
        missing = [i for i in rec["task_ids"] if i not in by_id]
        if missing:
            raise PosttrainError(f"resume: in-flight batch of step {rec['step']} names tasks {missing[:3]} that this run's "
                                 "task pool does not have (tasks changed since the checkpoint?)")
        tasks = [by_id[i] for i in rec["task_ids"]]
        if rec["trajs"] is not None:
            pipe.issue(rec["step"], tasks, rec["version"], [traj_from_dict(d) for d in rec["trajs"]])
            b = pipe.batches[rec["step"]]
            b.generate_s, b.verify_s = rec["generate_s"], rec["verify_s"]
            reused += 1
        else:
            pipe.issue(rec["step"], tasks, max(floor, rec["version"]), regenerated=rec["version"] < floor)
            regen += int(rec["version"] < floor)
    return reused, regen
