"""τ²-bench episodes through the loop: agent turns, a simulated user from a second model, DB-state reward."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("tau2")

from posttrain.config_schema import SecondModelConfig  # noqa: E402
from posttrain.models.service import open_service  # noqa: E402
from posttrain.registry import build  # noqa: E402
from posttrain.rollout.agent.tau2_loop import Tau2Options, Tau2Runner  # noqa: E402
from posttrain.rollout.engine import Completion  # noqa: E402


class ScriptedAgent:
    """An Engine that replies with fixed texts in order (the gold agent), then a closing message."""

    weights_version = 0
    max_len = 1 << 20

    def __init__(self, tok, replies):
        self.tok, self.replies, self.i = tok, list(replies), 0

    def generate(self, requests):
        out = []
        for r in requests:
            text = self.replies[min(self.i, len(self.replies) - 1)]
            self.i += 1
            ids = tuple(self.tok(text, add_special_tokens=False)["input_ids"]) + (self.tok.eos_token_id,)
            out.append(Completion(r.id, 0, ids, (0.0,) * len(ids), text, "stop"))
        return out

    def load_weights(self, state, version):
        raise NotImplementedError


@pytest.fixture(scope="module")
def tiny():
    from posttrain.config_schema import TinyModelConfig
    from posttrain.models.tiny import build_tiny

    return build_tiny(TinyModelConfig(max_position_embeddings=4096), seed=0)


@pytest.fixture(scope="module")
def user_dir(tiny, tmp_path_factory):
    """The tiny model saved as an HF directory with a context long enough for a scenario: the user model."""
    from posttrain.models import save_policy

    return str(save_policy(*tiny, tmp_path_factory.mktemp("user") / "tiny4k"))


@pytest.fixture(scope="module")
def mock_task():
    ts = build("tau2_mock", kind="domain", split=None).generate(100, seed=0)
    return next(t for t in ts if t.metadata["tau2_task_id"] == "create_task_1")


def gold_replies(task):
    calls = [f"<tool_call>{json.dumps(a)}</tool_call>" for a in json.loads(task.oracle)]
    return calls + ["Your task 'Important Meeting' has been created successfully."]


def test_the_gold_agent_through_the_loop_with_a_model_user_scores_one(tiny, user_dir, mock_task):
    model, tok = tiny
    user = open_service("user", SecondModelConfig(path=user_dir, max_new_tokens=8))
    runner = Tau2Runner(ScriptedAgent(tok, gold_replies(mock_task)), tok, user, Tau2Options(max_steps=2))
    (traj,) = asyncio.run(runner.run([mock_task]))
    assert traj.reward == 1.0, traj.verify
    roles = [t.role for t in traj.turns]
    assert roles[:3] == ["user", "assistant", "tool"]  # the customer opens; the call's result follows it
    assert all(not t.trainable for t in traj.turns if t.role in ("user", "tool"))


def test_a_failing_user_model_is_an_infra_error(tiny, mock_task, failing_server):
    model, tok = tiny
    user = open_service("user", SecondModelConfig(url=failing_server, retries=0))
    runner = Tau2Runner(ScriptedAgent(tok, gold_replies(mock_task)), tok, user, Tau2Options(max_steps=2))
    (traj,) = asyncio.run(runner.run([mock_task]))
    assert traj.infra_error and traj.error.boundary == "engine" and "user model failed" in traj.error.message


def test_a_real_model_agent_runs_whole_episodes_with_token_layout_for_training(tiny, user_dir, mock_task):
    from posttrain.rollout import make_engine

    model, tok = tiny
    user = open_service("user", SecondModelConfig(path=user_dir, max_new_tokens=8))
    runner = Tau2Runner(make_engine("hf", model, tok), tok, user, Tau2Options(max_steps=3, max_new_tokens=12, seed=0))
    (traj,) = asyncio.run(runner.run([mock_task]))
    assert traj.verify.status == "ok" and traj.finish_reason in ("max_steps", "user_stop", "max_user_turns")
    agent = [t for t in traj.turns if t.role == "assistant"]
    assert len(agent) >= 1 and all(len(t.logprobs) == len(t.token_ids) for t in agent)
    assert traj.timings["user_s"] > 0 and traj.timings["generate_s"] > 0


def test_the_rollout_entry_runs_a_user_task_against_the_runs_user_model_beside_a_one_step_task(tiny, user_dir,
                                                                                                 mock_task):
    """What the RL loop and the held-out eval call (rollout/entry.py): a τ² task is a conversation with the
    run's `user` model (opened by the recipe), scored on its database; groups stay in task order."""
    from posttrain.models.service import register_service, unregister_service
    from posttrain.rollout.engine import SamplingParams
    from posttrain.rollout.entry import rollout_options, rollout_scored
    from posttrain.tasks import generate_domain
    from posttrain.verifiers.run import VerifierRunner

    model, tok = tiny
    arith = generate_domain("arithmetic", 1, 0)[0]
    register_service(open_service("user", SecondModelConfig(path=user_dir, max_new_tokens=8)))
    try:
        opts = rollout_options(SamplingParams(temperature=0.0, n=1, max_new_tokens=16))
        trajs = asyncio.run(rollout_scored(ScriptedAgent(tok, gold_replies(mock_task)), tok, [arith, mock_task], opts,
                                           VerifierRunner(None)))
    finally:
        unregister_service("user")
    assert [(t.task_id, t.group) for t in trajs] == [(arith.id, 0), (mock_task.id, 1)]
    assert trajs[1].reward == 1.0 and [t.role for t in trajs[1].turns][:2] == ["user", "assistant"], trajs[1].verify


def test_a_run_naming_a_tau2_domain_without_a_user_model_is_refused_at_load():
    from posttrain.config import load_config
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    cfg = load_config(None, ["tasks.domains={tau2_mock: {n_train: 4, n_eval: 2}}"])
    with pytest.raises(ConfigError, match=r"tasks.domains.tau2_mock: its episodes talk to a second model as 'user', "
                                          r"and models.user is not set"):
        check_config(cfg, needs=("tasks",))


def test_a_tau2_judge_role_that_is_not_a_model_of_the_run_is_refused_at_load():
    from posttrain.config import load_config
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    cfg = load_config(None, ["tasks.domains={tau2_mock: {n_train: 4, n_eval: 2, args: {judge: judge}}}",
                             "models={user: {path: models/smollm2}}"])
    with pytest.raises(ConfigError, match=r"tasks.domains.tau2_mock.args.judge='judge' names a second model, "
                                          r"and models.judge is not set"):
        check_config(cfg, needs=("tasks",))


def test_an_unknown_tau2_reward_mode_is_refused_at_load_naming_the_choices():
    from posttrain.config import load_config
    from posttrain.config_check import check_config
    from posttrain.errors import ConfigError

    cfg = load_config(None, ["tasks.domains={tau2_mock: {n_train: 4, n_eval: 2, args: {reward: strict}}}",
                             "models={user: {path: models/smollm2}}"])
    with pytest.raises(ConfigError, match=r"tasks.domains.tau2_mock.args.reward='strict': expected one of guarded, official"):
        check_config(cfg, needs=("tasks",))
