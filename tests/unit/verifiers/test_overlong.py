"""rl.overlong: a completion cut off by the token budget is gated, scored as is, or softly penalised
(DAPO eq. 13), with hand-computed rewards; a task may override gate/score; bad settings are refused."""

import asyncio
import dataclasses

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_rl_splits, overlong_policy
from posttrain.errors import ConfigError
from posttrain.tasks import generate_domain
from posttrain.tasks.splits import Splits
from posttrain.types import Limits, Trajectory, Turn
from posttrain.verifiers.run import VerifierRunner


def traj(task, text, n_tokens, finish="length"):
    ids = tuple(range(5, 5 + n_tokens))
    return Trajectory(task.id, task.version, task.domain, (1, 2), (Turn("assistant", text, ids, (-0.1,) * n_tokens),),
                      finish_reason=finish)


@pytest.fixture(scope="module")
def task():
    t = generate_domain("arithmetic", 1, seed=0)[0]
    return dataclasses.replace(t, limits=dataclasses.replace(t.limits, max_new_tokens=32))


def policy(*overrides):
    return overlong_policy(load_config(None, ["rl.max_new_tokens=20", *overrides]))


def judge(task, t, pol):
    return asyncio.run(VerifierRunner(None, overlong=pol).verify_one(task, t))


def test_gate_scores_a_truncated_right_answer_zero_without_the_verifier(task):
    out = judge(task, traj(task, task.oracle, 20), policy())
    assert out.reward == 0.0 and out.verify.details["rule"] == "format" and "unterminated" in out.verify.reason


def test_score_verifies_a_truncated_answer_as_is(task):
    right = judge(task, traj(task, task.oracle, 20), policy("rl.overlong.name=score"))
    wrong = judge(task, traj(task, "no number here", 20), policy("rl.overlong.name=score"))
    assert right.reward == 1.0 and right.verify.passed
    assert wrong.reward == 0.0 and wrong.verify.details.get("rule") != "format"


def test_score_keeps_the_other_format_rules(task):
    out = judge(task, traj(task, f"{task.oracle}\n{task.oracle}", 20), policy("rl.overlong.name=score"))
    assert out.reward == 0.0 and out.verify.details["rule"] == "format" and "more than one line" in out.verify.reason


@pytest.mark.parametrize("tokens, penalty", [
    (12, 0.0),  # budget 20 - cache 8 = 12 tokens: no penalty yet
    (14, -0.5 * 2 / 8),  # ((20 - 8) - 14) / 8 * factor 0.5
    (20, -0.5),  # at the budget: -factor
])
def test_soft_penalty_is_linear_over_the_last_cache_tokens(task, tokens, penalty):
    pol = policy("rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 8, factor: 0.5}")
    out = judge(task, traj(task, task.oracle, tokens, finish="length" if tokens == 20 else "stop"), pol)
    assert out.reward == pytest.approx(1.0 + penalty)
    assert out.verify.passed  # the penalty shapes the reward only; held-out pass@1 reads verify.passed


def test_soft_penalty_uses_the_tasks_own_smaller_budget(task):
    small = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_new_tokens=10))
    pol = policy("rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 4}")
    assert judge(small, traj(small, small.oracle, 8), pol).reward == pytest.approx(1.0 - 2 / 4)  # (10-4-8)/4


def test_a_task_field_overrides_the_runs_choice(task):
    gated = dataclasses.replace(task, metadata={**task.metadata, "overlong": "gate"})
    scored = dataclasses.replace(task, metadata={**task.metadata, "overlong": "score"})
    assert judge(gated, traj(gated, gated.oracle, 20), policy("rl.overlong.name=score")).reward == 0.0
    assert judge(scored, traj(scored, scored.oracle, 20), policy()).reward == 1.0


@pytest.mark.parametrize("overrides, named", [
    (["rl.overlong.name=nope"], "rl.overlong.name='nope'"),
    (["rl.overlong.name=soft_penalty"], "rl.overlong.args"),  # no cache given
    (["rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 20}"], "rl.overlong.args.cache=20"),
    (["rl.overlong.name=score", "rl.overlong.args={cache: 4}"], "rl.overlong.args.cache"),
    (["rl.overlong.name=gate", "rl.overlong.args={budget: 4}"], "rl.overlong.args.budget"),
])
def test_bad_overlong_settings_are_one_line_errors_naming_the_key(overrides, named):
    with pytest.raises(ConfigError, match=r"^[^\n]*$") as e:
        policy(*overrides)
    assert named in str(e.value)


def test_a_non_gate_policy_on_multi_step_episodes_is_refused(task):
    episode = dataclasses.replace(task, limits=Limits(max_steps=4))
    cfg = load_config(None, ["rl.overlong.name=score"])
    with pytest.raises(ConfigError, match="multi-step episodes"):
        check_rl_splits(cfg, Splits([episode], []))
    check_rl_splits(load_config(None, []), Splits([episode], []))  # gate: the agent loop's own rule


def test_a_soft_penalty_as_long_as_a_domains_budget_is_refused(task):
    cfg = load_config(None, ["rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 16}"])
    small = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_new_tokens=8))
    with pytest.raises(ConfigError, match="answers within 8 tokens"):
        check_rl_splits(cfg, Splits([small], []))


def test_an_unknown_task_override_is_refused(task):
    bad = dataclasses.replace(task, metadata={**task.metadata, "overlong": "maybe"})
    with pytest.raises(ConfigError, match="metadata.overlong='maybe'"):
        check_rl_splits(load_config(None, []), Splits([bad], []))
