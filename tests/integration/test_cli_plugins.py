"""`--plugin FILE` on every command that builds tasks or verifiers, through the real CLI.

Each command runs in its own process, forked from a server that loaded the built-ins and nothing
else (posttrain/testing/cli_fork.py): the registries are process-wide, so an in-process run would
find the plugin's names registered by an earlier test and prove nothing."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]

# names no other test registers: the test process itself loads this file for the replay run
PLUGIN = '''
import random
from posttrain.registry import domain, verifier
from posttrain.types import Limits, Message, Spec, Task, VerifyResult

WORDS = ["lantern", "harbor", "quartz", "meadow"]

@verifier("plugtest_exact", answer_format="line")
class Exact:
    def __init__(self, answer):
        self.answer = answer
    async def __call__(self, task, traj, ctx):
        ok = traj.completion_text.strip() == self.answer
        return VerifyResult(float(ok), ok)

@domain("plugtest_upper")
class Upper:
    name = "plugtest_upper"
    def generate(self, n, seed, difficulty=1.0):
        rng = random.Random(seed)
        words = [rng.choice(WORDS) for _ in range(n)]
        return [Task(id=f"upper-{i}", domain=self.name, prompt=(Message("user", f"Uppercase {w}"),),
                     verifier=Spec("plugtest_exact", {"answer": w.upper()}), limits=Limits(max_new_tokens=4),
                     oracle=w.upper()) for i, w in enumerate(words)]
    def wrong_answer(self, task, rng):
        return task.oracle.lower()
'''


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    path = tmp_path / "upper_domain.py"
    path.write_text(PLUGIN)
    return path


def posttrain(*args) -> subprocess.CompletedProcess:
    return run_cli([str(a) for a in args], cwd=ROOT, timeout=300)


def _generated(tmp_path: Path, plugin: Path) -> Path:
    out = tmp_path / "upper.jsonl"
    r = posttrain("tasks", "generate", "plugtest_upper", "--n", "3", "--out", out, "--plugin", plugin)
    assert r.returncode == 0, r.stderr[-1500:]
    return out


def test_tasks_generate_builds_a_plugin_domain(tmp_path, plugin):
    out = _generated(tmp_path, plugin)
    assert [json.loads(line)["domain"] for line in out.read_text().splitlines()] == ["plugtest_upper"] * 3


def test_tasks_validate_accepts_plugin_verifiers_with_plugin(tmp_path, plugin):
    r = posttrain("tasks", "validate", _generated(tmp_path, plugin), "--plugin", plugin)
    assert r.returncode == 0 and "3 tasks ok" in r.stdout, r.stderr[-1500:]


def test_tasks_validate_without_the_plugin_names_the_unregistered_verifier(tmp_path, plugin):
    r = posttrain("tasks", "validate", _generated(tmp_path, plugin))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "'plugtest_exact'" in r.stderr, r.stderr[-1500:]


def test_tasks_import_forces_a_plugin_verifier(tmp_path, plugin):
    rows, out = tmp_path / "rows.jsonl", tmp_path / "t.jsonl"
    rows.write_text(json.dumps({"prompt": "Uppercase quartz", "answer": "QUARTZ"}) + "\n")
    r = posttrain("tasks", "import", rows, "--out", out, "--verifier", "plugtest_exact", "--plugin", plugin)
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(out.read_text().splitlines()[0])["verifier"]["name"] == "plugtest_exact"


def _eval_run(tmp_path: Path, plugin: Path) -> tuple[subprocess.CompletedProcess, Path]:
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    model = save_policy(*build_tiny(), tmp_path / "tiny")
    suite, out = tmp_path / "suite.yaml", tmp_path / "o"
    suite.write_text(yaml.safe_dump({"name": "upper", "sampling": {"max_new_tokens": 4},
                                     "tasks": [{"domain": "plugtest_upper", "n": 2, "seed": 0}]}))
    return posttrain("eval", "--model", model, "--suite", suite, "--out", out, "--no-cache", "--json",
                     "--plugin", plugin), out


def test_eval_runs_a_suite_of_a_plugin_domain(tmp_path, plugin):
    r, _ = _eval_run(tmp_path, plugin)
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(r.stdout)["summary"]["run"]["samples_new"] == 2


def test_replay_of_an_evaluation_run_rebuilds_its_suite_with_plugin(tmp_path, plugin):
    _, out = _eval_run(tmp_path, plugin)
    r = posttrain("replay", out, "--json", "--plugin", plugin)
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(r.stdout)["changed"] == 0, r.stdout


def test_replay_of_a_pinned_plugin_run_finds_its_verifier(tmp_path, plugin):
    # a training run that names the plugin in its config.yaml and pinned its tasks in RUN/tasks/
    from posttrain.config import dump_config, load_config
    from posttrain.store.trajectories import TrajectoryStore
    from posttrain.tasks.io import load_tasks, save_tasks
    from posttrain.types import Trajectory, Turn, VerifyResult

    run = tmp_path / "run"
    (run / "tasks").mkdir(parents=True)
    tasks = load_tasks(_generated(tmp_path, plugin))
    save_tasks(tasks[:2], run / "tasks" / "train.jsonl")
    save_tasks(tasks[2:], run / "tasks" / "heldout.jsonl")
    cfg = load_config(None, ["tasks.domains={plugtest_upper: {}}"])
    cfg.plugins = [str(plugin)]
    dump_config(cfg, run / "config.yaml")
    store = TrajectoryStore(run / "trajectories.sqlite")
    store.put_many([Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", t.oracle),), step=1, group=g,
                               verify=VerifyResult(1.0, True)) for g, t in enumerate(tasks[:2])])
    store.close()
    r = posttrain("replay", run, "--json")
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads(r.stdout)["changed"] == 0, r.stdout
