"""The step loop with a scripted model: turns, masks, stops, rewards, recoverable errors."""

import re

from tests.unit.agent.conftest import ScriptedEngine, calc_task, run

from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.train.batching import pack_trajectories

CALL = format_tool_call("calculator", {"expression": "4821*937"})


def solver(text):
    """Calls the calculator, then answers with the observation."""
    if "<|tool|>" in text:
        return f"The answer is {re.findall(r'<[|]tool[|]>(.*?)<[|]end[|]>', text)[-1]}."
    a, b = re.search(r"What is (\d+) \* (\d+)", text).groups()
    return format_tool_call("calculator", {"expression": f"{a}*{b}"})


def episode(tok, policy, task=None, **opts):
    eng = ScriptedEngine(tok, policy)
    return run(rollout_agent(eng, tok, [task or calc_task()], AgentOptions(**opts)))[0]


def test_solved_episode_records_every_turn(tok):
    t = episode(tok, solver)
    assert t.finish_reason == "answer" and t.verify.passed and t.reward == 1.0
    assert [x.role for x in t.turns] == ["assistant", "tool", "assistant"]
    call, obs, final = t.turns
    assert call.tool_call.name == "calculator" and obs.text == "4517277" and obs.exec_result.status == "ok"
    assert call.trainable and not obs.trainable and final.trainable
    assert len(call.logprobs) == len(call.token_ids) > 0
    assert {"generate_s", "tool_s", "verify_s", "total_s"} <= set(t.timings)


def test_loss_mask_is_one_on_model_tokens_and_zero_on_observations(tok):
    t = episode(tok, solver)
    tb = pack_trajectories([t], tok.pad_token_id)
    mask = tb.loss_mask[0].tolist()  # column j scores token j+1
    n_prompt, (call, obs, final) = len(t.prompt_ids), t.turns
    seg = lambda start, n: mask[start - 1: start - 1 + n]  # noqa: E731
    assert seg(n_prompt, len(call.token_ids)) == [1.0] * len(call.token_ids)
    assert seg(n_prompt + len(call.token_ids), len(obs.token_ids)) == [0.0] * len(obs.token_ids)
    assert sum(mask) == len(call.token_ids) + len(final.token_ids)


def test_trajectory_ids_are_what_the_model_was_conditioned_on(tok):
    seen = []

    def spy(text):
        seen.append(text)
        return solver(text)

    t = episode(tok, spy)
    ids = list(t.prompt_ids) + [i for x in t.turns[:2] for i in x.token_ids]
    assert tok.decode(ids, skip_special_tokens=False) == seen[-1]


def test_malformed_call_is_an_error_observation_and_the_episode_recovers(tok):
    def sloppy(text):
        return '<tool_call>{"name": "calculator", "arguments": {</tool_call>' if "<|tool|>" not in text else solver(text)

    def recovering(text):
        return sloppy(text) if text.count("<|tool|>") == 0 else solver(text.replace("error:", "")) if text.count("<|tool|>") == 2 else CALL

    t = episode(tok, recovering, malformed_penalty=0.25)
    assert t.finish_reason == "answer" and t.verify.passed
    first_obs = t.turns[1]
    assert first_obs.text.startswith("error: tool call is not JSON") and first_obs.exec_result.error.startswith("parse:not_json")
    assert t.num_steps == 3
    agent = t.verify.details["agent"]
    assert agent["malformed"] == 1 and agent["failed_steps"][0]["step"] == 0
    assert abs(t.reward - (1.0 - 0.25)) < 1e-9


def test_model_that_never_finishes_stops_at_max_steps_and_is_scored(tok):
    t = episode(tok, lambda text: CALL, task=calc_task(max_steps=3))
    assert t.finish_reason == "max_steps" and t.num_steps == 3
    assert t.verify.status == "ok" and not t.verify.passed and t.verify.reason == ""  # judged, not an infra error


def test_token_budget_stops_the_episode(tok):
    t = episode(tok, lambda text: CALL, token_budget=200)
    assert t.finish_reason == "token_budget" and t.verify.status == "ok"
    assert len(t.prompt_ids) + sum(len(x.token_ids) for x in t.turns) <= 200


def test_time_budget_stops_the_episode(tok):
    import time

    def slow(text):
        time.sleep(0.15)
        return CALL

    t = episode(tok, slow, time_budget_s=0.4)
    assert t.finish_reason == "time_budget" and t.num_steps < 4 and t.verify.status == "ok"


def test_submit_ends_the_episode(tok):
    t = episode(tok, lambda text: format_tool_call("submit", {}))
    assert t.finish_reason == "submit" and t.num_steps == 1 and t.turns[-1].tool_call.name == "submit"


def test_step_bonus_rewards_solving_in_fewer_steps(tok):
    fast = episode(tok, solver, step_weight=0.4)
    slow = episode(tok, lambda x: CALL if x.count("<|tool|>") < 2 else solver(x), step_weight=0.4)
    assert fast.verify.passed and slow.verify.passed and fast.reward > slow.reward


def test_group_of_samples_is_request_major(tok):
    eng = ScriptedEngine(tok, solver)
    trajs = run(rollout_agent(eng, tok, [calc_task(0), calc_task(1, 12, 34)], AgentOptions(n=3)))
    assert [(t.group, t.sample) for t in trajs] == [(g, k) for g in range(2) for k in range(3)]
    assert all(t.verify.passed for t in trajs)
