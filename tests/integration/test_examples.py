"""Every shipped example runs in CI at reduced size, and the agent quickstart runs end to end.

The full-size runs (which must show a held-out gain) are in docs/benchmarks.md ("Examples");
here each one only has to run through the real CLI and write its results."""

import json
import sys
from pathlib import Path

import pytest
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
AGENT_SMALL = ["sft.steps=4", "recipe.agent.stop_at=null", "recipe.agent.habits=null", "recipe.agent.n_train=16",
               "recipe.agent.n_eval=4", "recipe.agent.rl_minutes=0.02", "recipe.agent.step_samples=1", "rl.steps=1",
               "rl.prompts_per_step=2", "rl.group_size=2", "threads=1"]


def test_every_example_is_run_by_an_integration_test():
    tests = "".join(p.read_text() for p in (ROOT / "tests" / "integration").glob("test_*.py"))
    examples = [p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").rglob("*") if p.suffix in (".yaml", ".py")]
    assert examples
    assert [e for e in examples if e not in tests] == []


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    """One reduced agent quickstart through the real CLI, read by the tests below (each checks one property)."""
    out = tmp_path_factory.mktemp("agent-quickstart") / "agent"
    r = run_cli(["quickstart", "--agent", "--out", str(out), *AGENT_SMALL], cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return out, r


def test_agent_quickstart_cli_writes_its_summary(agent_run):
    out, r = agent_run
    s = json.loads((out / "agent_summary.json").read_text())
    assert s["n_tasks"] == 4 and s["sft_steps"] == 4 and s["rl_steps"] >= 1
    assert "| completion (pass) |" in r.stdout
    assert (out / "config.yaml").is_file() and (out / "trajectories.sqlite").is_file()


def test_agent_quickstart_pins_the_tasks_it_trained_and_evaluated_on(agent_run):
    from posttrain.tasks.splits import load_pinned

    out, _ = agent_run
    pinned = load_pinned(out)
    held = json.loads((out / "agent_summary.json").read_text())["n_tasks"]
    assert pinned is not None and len(pinned.held_out) == held and pinned.train
    assert {t.id for t in pinned.train}.isdisjoint(t.id for t in pinned.held_out)
    assert all("calculator" in t.environment.tools and t.environment.files for t in pinned.held_out)  # tools, tables


def test_agent_quickstart_measured_warm_ups_check_their_levels_and_print_them(tmp_path):
    """The copy-skill SFT and the habit SFT each stop on a level measured on training-pool tasks."""
    out = tmp_path / "agent"
    small = [a for a in AGENT_SMALL if not a.startswith(("recipe.agent.stop_at", "recipe.agent.habits", "sft.steps"))]
    r = run_cli(["quickstart", "--agent", "--out", str(out), *small, "sft.steps=4",
                              "recipe.agent.stop_at=0.99", "recipe.agent.check_every=2", "recipe.agent.val_tasks=2",
                              "recipe.agent.habits=[0.9,0.3,0.3]", "recipe.agent.habit_steps=2"],
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SFT step 2: validation completion" in r.stdout and "SFT step 4: validation completion" in r.stdout
    assert "habit step 2: validation calculator called in" in r.stdout
    s = json.loads((out / "agent_summary.json").read_text())
    assert s["sft_steps"] == 4 + 2  # the copy-skill steps, then the habit steps
