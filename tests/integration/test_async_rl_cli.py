"""The real `posttrain rl` CLI at rl.max_staleness=1, interrupted by SIGINT and then by SIGKILL,
resumed each time: every step is logged once, and the trajectory store holds exactly the
prompts the task scheduler issued, in order, none skipped and none twice.

The proof replays the scheduler: the same task pool, mixture, policy and seed, drawing in
the asynchronous loop's order (batches 0..K first, then batch s+K+1 after observing step s)
and observing the stored groups of each step. Any skipped, repeated or re-drawn prompt in
flight across an interrupt would make the stored tasks of some step differ from the replay.
"""

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
STEPS, K, P, G = 40, 1, 4, 4  # 40: a tiny step can take ~0.05 s, and the signal must land mid-run
ARGS = ["examples/tiny_rl.yaml", f"rl.steps={STEPS}", "rl.checkpoint_every=4", f"rl.max_staleness={K}",
        f"rl.prompts_per_step={P}", f"rl.group_size={G}", "tasks.domains.arithmetic.n_train=60",
        "tasks.domains.arithmetic.n_eval=4", "sft.steps=4", "engine.name=hf"]


def metric_steps(run_dir):
    p = run_dir / "metrics.jsonl"
    return [json.loads(line)["step"] for line in p.read_text().splitlines()] if p.is_file() else []


def run_until(args, out, n_steps, sig):
    proc = subprocess.Popen(CLI + args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(metric_steps(out)) < n_steps and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, f"the run ended before the signal: {err[-1500:]}"


def replay_scheduler(out):
    from posttrain.config import load_config
    from posttrain.schedule import Scheduler
    from posttrain.store.trajectories import TrajectoryStore
    from posttrain.tasks.splits import load_pinned
    from posttrain.train.rl import group_by_task

    cfg = load_config(out / "config.yaml", [])
    pool = load_pinned(out).rl
    mixture = {d: c.weight for d, c in cfg.tasks.domains.items() if any(t.domain == d for t in pool)}
    sched = Scheduler(pool, mixture or None, policy=cfg.schedule.name, seed=cfg.seed, **cfg.schedule.args)
    store = TrajectoryStore(out / "trajectories.sqlite")
    issued = [[t.id for t in sched.next_batch(P)] for _ in range(K + 1)]
    stored = []
    for s in range(STEPS):
        groups = group_by_task(list(store.iter(step=s)))
        stored.append([g[0].task_id for g in groups])
        sched.observe(groups)
        sched.filter_groups(groups)
        if s + K + 1 < STEPS:
            issued.append([t.id for t in sched.next_batch(P)])
    store.close()
    return issued, stored


@pytest.mark.slow
@pytest.mark.timeout(900)  # four CLI processes; a loaded shared machine has taken 5 minutes
def test_async_run_resumes_losslessly_after_sigint_and_then_sigkill(tmp_path):
    out = tmp_path / "run"
    run_until(["rl", *ARGS, "--out", str(out)], out, 3, signal.SIGINT)
    after_int = len(metric_steps(out))
    assert 3 <= after_int < STEPS
    run_until(["rl", *ARGS[:1], "--resume", str(out)], out, after_int + 6, signal.SIGKILL)  # past a periodic checkpoint
    assert len(metric_steps(out)) < STEPS
    r = run_cli(["rl", *ARGS[:1], "--resume", str(out)], cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert metric_steps(out) == list(range(STEPS))
    db = sqlite3.connect(out / "trajectories.sqlite")
    per_step = db.execute("SELECT step, COUNT(*) FROM trajectories GROUP BY step ORDER BY step").fetchall()
    assert per_step == [(s, P * G) for s in range(STEPS)]
    issued, stored = replay_scheduler(out)
    assert stored == issued[:STEPS]
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["async/reused"] >= 1  # the SIGKILL resume trained on batches saved in flight
    assert max(r["async/staleness"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())) <= K
