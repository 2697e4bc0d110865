"""`posttrain rl` on a mixed batch (single-turn arithmetic + multi-step `tools` episodes)."""

import json
from pathlib import Path
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
name: agent-rl
seed: 0
model: {tiny: {max_position_embeddings: 1024}}
tasks:
  domains:
    arithmetic: {n_train: 16, n_eval: 2}
    tools: {n_train: 16, n_eval: 2, difficulty: 0, args: {max_new_tokens: 32}}
sft: {steps: 1, batch_size: 4}
rl: {steps: 2, prompts_per_step: 4, group_size: 2, checkpoint_every: 0}
agent: {token_budget: 480, malformed_penalty: 0.05}
"""


def test_rl_cli_trains_on_agent_episodes(tmp_path):
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(CONFIG)
    out = tmp_path / "run"
    r = run_cli(["rl", str(cfg), "--out", str(out)], cwd=ROOT,
                       timeout=110)
    assert r.returncode == 0, r.stderr[-2000:]
    from posttrain.store.trajectories import TrajectoryStore

    store = TrajectoryStore(out / "trajectories.sqlite")
    trajs = list(store.iter())
    store.close()
    agent = [t for t in trajs if t.domain == "tools"]
    single = [t for t in trajs if t.domain == "arithmetic"]
    assert agent and single and len(trajs) == 2 * 4 * 2
    for t in agent:  # multi-step episodes: several model turns, observations masked out, a recorded stop
        assert t.finish_reason in {"answer", "submit", "max_steps", "time_budget", "token_budget"}
        assert all(x.trainable == (x.role == "assistant") for x in t.turns)
        assert all(x.exec_result is not None for x in t.turns if x.role == "tool")
        assert t.verify is not None and "agent" in t.verify.details
    assert any(t.num_steps > 1 for t in agent)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1] and all("reward/tools" in r for r in rows)
