"""Post-mortem data: a run's failed trajectories become training data about its own errors.

    summary = postmortem(Path("runs/x"))    # -> runs/x/postmortem/{sft.jsonl, dpo.jsonl, summary.json}

For every failed, verifier-judged trajectory (not an infrastructure error), the failing
attempt and the verifier's feedback (its reason plus details such as the failing test,
stderr, the schema error) become a conversation:

    <task prompt> / assistant: <failed attempt> / user: "checked and failed: <feedback> ..."
    -> assistant target: a corrected attempt

The corrected attempt is a later success on the same task in the same run (the earliest
one after the failure), or else the task's oracle solution. Tasks are rebuilt from the
run's `config.yaml` (same seeded generators); a task that cannot be rebuilt still gets
examples from later successes, with the prompt decoded from the stored token ids.

Multi-turn trajectories (tool calls and observations): the transcript is replayed as
messages and the feedback names the failing step (the first tool observation that did
not succeed, else the last assistant step) and quotes its observation.

Outputs: `sft.jsonl` rows `{"messages": [...]}` for `posttrain sft`, and `dpo.jsonl` rows
`{"prompt": [...], "chosen", "rejected"}` (single-turn failures only) for `posttrain dpo`.

Limits: feedback keys that would leak the answer (`expected`, `oracle`, `target`) are
withheld; one example per distinct (task, failed answer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from posttrain.errors import TaskFileError
from posttrain.store.run import SUMMARY, TRAJECTORIES, RunDir
from posttrain.types import Message, Task, Trajectory, thaw

LEAKY = ("expected", "oracle", "target", "solution")
MAX_FIELD = 300


def feedback_text(traj: Trajectory) -> str:
    """The verifier's judgement as one short paragraph, without the expected answer."""
    v = traj.verify
    parts = [v.reason] if v is not None and v.reason else []
    details: Mapping[str, Any] = thaw(v.details) if v is not None else {}
    for k, val in details.items():
        if k in LEAKY or val in (None, "", [], {}):
            continue
        s = val if isinstance(val, str) else json.dumps(val)
        parts.append(f"{k}: {s[-MAX_FIELD:]}")
    if traj.error is not None:
        parts.append(f"{traj.error.boundary} error: {traj.error.message[:MAX_FIELD]}")
    return "; ".join(parts) or f"score {traj.reward:.2f} (not passed)"


def failing_step(traj: Trajectory) -> tuple[int, str]:
    """(1-based assistant step, its observation) where a multi-turn episode went wrong."""
    step, last_obs = 0, ""
    for turn in traj.turns:
        if turn.role == "assistant":
            step += 1
            last_obs = ""
        elif turn.role == "tool":
            bad = turn.exec_result is not None and turn.exec_result.status != "ok"
            last_obs = turn.text
            if bad:
                return step, turn.text[-MAX_FIELD:]
    return step, last_obs[-MAX_FIELD:]


def transcript(traj: Trajectory) -> list[Message]:
    """The attempt as chat messages: assistant steps and tool observations in order."""
    out = []
    for t in traj.turns:
        out.append(Message("tool" if t.role == "tool" else "assistant", t.text))
    return out


def postmortem_messages(prompt: tuple[Message, ...], traj: Trajectory) -> list[Message]:
    fb = feedback_text(traj)
    if traj.num_steps > 1 or any(t.role == "tool" for t in traj.turns):
        step, obs = failing_step(traj)
        note = (f"Your attempt was checked and failed at step {step} of {traj.num_steps}. "
                f"Observation at that step: {obs or '(none)'}. Verifier: {fb}. Write a corrected attempt.")
    else:
        note = f"Your answer was checked and failed: {fb}. Write a corrected answer."
    return [*prompt, *transcript(traj), Message("user", note)]


def _corrections(trajs: list[Trajectory]) -> dict[str, list[Trajectory]]:
    wins: dict[str, list[Trajectory]] = {}
    for t in trajs:
        if t.verify is not None and t.verify.passed and t.verify.status == "ok":
            wins.setdefault(t.task_id, []).append(t)
    return wins


def rebuild_tasks(run_dir: Path) -> dict[str, Task]:
    cfg_path = RunDir(run_dir).config
    if not cfg_path.is_file():
        return {}
    from posttrain.config import load_config
    from posttrain.config_check import load_plugins
    from posttrain.tasks.splits import load_pinned, make_splits

    sp = load_pinned(run_dir)  # the exact tasks the run trained on; regenerate only for runs that pinned none
    if sp is None:
        cfg = load_config(cfg_path)
        load_plugins(cfg.plugins)
        sp = make_splits(cfg)
    return {t.id: t for t in sp.train + sp.held_out}


def _prompt_for(traj: Trajectory, tasks: Mapping[str, Task], tok: Any) -> tuple[Message, ...] | None:
    task = tasks.get(traj.task_id)
    if task is not None and task.version == traj.task_version:
        return tuple(task.prompt)
    if tok is None:
        return None
    return (Message("user", tok.decode(list(traj.prompt_ids), skip_special_tokens=True)),)


def build_examples(trajs: Iterable[Trajectory], tasks: Mapping[str, Task], tok: Any = None) -> tuple[list, list, dict]:
    trajs = list(trajs)
    wins = _corrections(trajs)
    sft, dpo, seen = [], [], set()
    counts = {"failed": 0, "from_later_success": 0, "from_oracle": 0, "no_correction": 0, "multi_turn": 0}
    for t in trajs:
        if t.verify is None or t.verify.passed or t.verify.status != "ok":
            continue
        counts["failed"] += 1
        key = (t.task_id, t.completion_text)
        if key in seen:
            continue
        seen.add(key)
        later = [w for w in wins.get(t.task_id, []) if w.step > t.step]
        task = tasks.get(t.task_id)
        if later:
            target, src = min(later, key=lambda w: (w.step, w.group, w.sample)).completion_text, "from_later_success"
        elif task is not None and task.oracle is not None and task.version == t.task_version:
            target, src = task.oracle, "from_oracle"
        else:
            counts["no_correction"] += 1
            continue
        prompt = _prompt_for(t, tasks, tok)
        if prompt is None:
            counts["no_correction"] += 1
            continue
        counts[src] += 1
        multi = len(t.turns) > 1
        counts["multi_turn"] += int(multi)
        msgs = postmortem_messages(prompt, t) + [Message("assistant", target)]
        sft.append({"messages": [{"role": m.role, "content": m.content} for m in msgs],
                    "meta": {"task_id": t.task_id, "step": t.step, "source": src}})
        if not multi and t.completion_text != target:
            dpo.append({"prompt": [{"role": m.role, "content": m.content} for m in prompt],
                        "chosen": target, "rejected": t.completion_text, "meta": {"task_id": t.task_id, "step": t.step}})
    return sft, dpo, counts


def postmortem(run_dir: str | Path, out: str | Path | None = None) -> dict:
    run = RunDir(run_dir)
    if not run.has_trajectories():
        raise TaskFileError(f"postmortem: {run.path} is not a run directory (no {TRAJECTORIES})")
    tok = None
    ck = run.newest_checkpoint()  # numerically newest: step-10 after step-9
    if ck or run.base_model.is_dir():
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(ck[1] if ck else run.base_model)
    with run.queries() as q:
        sft, dpo, counts = build_examples(q.trajectories(), rebuild_tasks(run.path), tok)
    out = Path(out) if out is not None else run.postmortem
    out.mkdir(parents=True, exist_ok=True)
    (out / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sft))
    (out / "dpo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dpo))
    summary = {**counts, "sft_rows": len(sft), "dpo_pairs": len(dpo), "out": str(out)}
    (out / SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary
