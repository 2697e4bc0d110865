"""`posttrain rl` through the real CLI: the block of settings that differ from a plain GRPO run is
printed at start, and each can be turned off by its key; held-out task files and a fixed prompt
order drive a real run (issue 38)."""

import json
import os
import sqlite3
import sys
from pathlib import Path
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
SMALL = ["tasks.domains.arithmetic.n_train=24", "tasks.domains.arithmetic.n_eval=4", "rl.prompts_per_step=2",
         "rl.group_size=2", "rl.steps=2", "rl.checkpoint_every=0", "log.trackers=[]", "log.detect_every=0",
         "sandbox.concurrency=1"]
# each departure a default run prints, by the key that turns it off
OFF = {"sft.steps": "sft.steps=0", "tasks.sft_frac": "tasks.sft_frac=0", "rl.optim.warmup": "rl.optim.warmup=0",
       "rl.overlong.name": "rl.overlong.name=score", "rl.loss_norm": "rl.loss_norm=all_tokens",
       "rl.loss.name": "rl.loss.name=grpo", "tasks.answer_format": "tasks.answer_format=text", "eval.before": "eval.before=false",
       "eval.after": "eval.after=false"}


def task_files(tmp_path):
    from posttrain.tasks import generate_domain
    from posttrain.tasks.io import save_tasks

    tasks = generate_domain("arithmetic", 8, seed=77)  # ids arithmetic-77-*: none is a generated run id
    save_tasks(tasks[:4], tmp_path / "train.jsonl")
    save_tasks(tasks[4:], tmp_path / "heldout.jsonl")
    return tasks


def departure_block(stdout):
    """The printed departures, one string per setting."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "settings that differ from a plain GRPO run" in line)
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line.strip())
    return block


def run(tmp_path, name, *overrides):
    out = tmp_path / name
    r = run_cli(["rl", "examples/tiny_rl.yaml", *SMALL, f"tasks.files=[{tmp_path / 'train.jsonl'}]",
                              *overrides, "--out", str(out)], cwd=ROOT, timeout=300,
                       env={**os.environ, "COLUMNS": "250"})  # one line per setting: rich wraps at the width
    assert r.returncode == 0, r.stderr[-2000:]
    return out, r.stdout


def test_defaults_print_every_departure_with_its_off_key(tmp_path):
    task_files(tmp_path)
    _, stdout = run(tmp_path, "defaults", "sft.steps=2", "recipe.rl.stop_at_pass=null")
    assert "settings that differ from a plain GRPO run" in stdout
    block = departure_block(stdout)
    for key, off in OFF.items():
        assert any(b.startswith(f"{key}=") and f"off: {off}" in b for b in block), (key, block)


def test_each_departure_turned_off_gives_a_plain_run_with_a_fixed_split_and_order(tmp_path):
    tasks = task_files(tmp_path)
    order = [[tasks[1].id, tasks[0].id], [tasks[3].id, tasks[1].id]]
    (tmp_path / "order.txt").write_text("\n".join(" ".join(line) for line in order) + "\n")
    out, stdout = run(tmp_path, "plain", *(v for k, v in OFF.items() if k != "rl.loss_norm"),
                      f"tasks.heldout_files=[{tmp_path / 'heldout.jsonl'}]", "tasks.domains={}",
                      "schedule.name=fixed_order", f"schedule.args.order_file={tmp_path / 'order.txt'}")
    block = departure_block(stdout)
    assert block[0].startswith("schedule.name=fixed_order")  # the one departure left is the one asked for
    assert len(block) == 1, block
    assert "held-out comparison skipped" in stdout
    assert not (out / "eval_before.json").exists() and not (out / "eval_after.json").exists()
    assert not (out / "sft-model").exists()  # no warm-up
    summary = json.loads((out / "summary.json").read_text())
    assert "before" not in summary and "after" not in summary and summary["eval"]["before"] is False
    pinned = {n: [json.loads(x)["id"] for x in (out / "tasks" / f"{n}.jsonl").read_text().splitlines()]
              for n in ("train", "heldout", "sft")}
    assert pinned == {"train": [t.id for t in tasks[:4]], "heldout": [t.id for t in tasks[4:]], "sft": []}
    db = sqlite3.connect(out / "trajectories.sqlite")
    for step, line in enumerate(order):  # the fixed order replayed step by step, group by group
        got = db.execute("SELECT grp, task_id FROM trajectories WHERE step=? AND sample=0 ORDER BY grp", (step,))
        assert [tid for _, tid in got] == line
