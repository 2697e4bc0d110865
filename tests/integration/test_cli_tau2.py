"""The real `posttrain rl` CLI on a τ²-bench domain: a model as the agent, a second model as the customer.

The tiny model (4k context) plays both; it cannot solve a task, so what is checked is the wiring a
user relies on: the splits hold different tasks (every τ² prompt is the same policy), episodes reach
the store with the customer's turns, and the held-out eval runs before and after RL.
"""

import json
import sqlite3
from pathlib import Path

import pytest
from posttrain.testing import cli_fork

pytest.importorskip("tau2")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny4k(tmp_path_factory):
    from posttrain.config_schema import TinyModelConfig
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    return str(save_policy(*build_tiny(TinyModelConfig(max_position_embeddings=4096), seed=0),
                           tmp_path_factory.mktemp("m") / "tiny4k"))


@pytest.fixture(scope="module")
def run(tiny4k, tmp_path_factory):
    out = tmp_path_factory.mktemp("r") / "run"
    r = cli_fork.run_cli(["rl", "examples/tiny_rl.yaml",
                          "tasks.domains={tau2_mock: {n_train: 4, n_eval: 2, args: {max_steps: 3, max_new_tokens: 16}}}",
                          f"models={{user: {{path: {tiny4k}, max_new_tokens: 8}}}}", f"model.path={tiny4k}",
                          "sft.steps=0", "rl.steps=2", "rl.prompts_per_step=2", "rl.group_size=2", "rl.max_new_tokens=16",
                          "engine.name=hf", "--out", str(out)], cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def _ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_training_and_held_out_splits_hold_different_tau2_tasks(run):
    train, held = _ids(run / "tasks" / "train.jsonl"), _ids(run / "tasks" / "heldout.jsonl")
    assert len(set(train)) == 4 and len(set(held)) == 2 and not set(train) & set(held)


def test_every_rl_sample_is_an_episode_with_the_simulated_customer(run):
    rows = sqlite3.connect(run / "trajectories.sqlite").execute(
        "SELECT domain, data FROM trajectories WHERE kind = 'train'").fetchall()
    assert len(rows) == 2 * 2 * 2 and {d for d, _ in rows} == {"tau2_mock"}
    roles = [[t["role"] for t in json.loads(data)["turns"]] for _, data in rows]
    assert all(r[0] == "user" and "assistant" in r for r in roles), roles  # the customer opens, the agent answers


def test_the_held_out_eval_runs_before_and_after_on_the_tau2_tasks(run):
    s = json.loads((run / "summary.json").read_text())
    assert s["before"]["n"] == {"tau2_mock": 2} and s["after"]["n"] == {"tau2_mock": 2}
