"""RL on an external agent: the proxy's token capture, and failing agents as data."""

from __future__ import annotations

import asyncio
import copy
import sys
from pathlib import Path

import pytest

from posttrain.rollout.agent.loop import AgentOptions
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.agent.external import ExternalAgent, ExternalRunner, rollout_external
from posttrain.serve.proxy_host import ServedProxy
from posttrain.testing.cli_fork import run_cli
from tests.unit.serve.conftest import (ANSWER, CALL, SHELL_CALL, calc_task, memorised,  # noqa: F401
                                      SH_PROMPTS, memorised_terminal, sh_task)

ROOT = Path(__file__).resolve().parents[2]
REACT = f"{sys.executable} {ROOT / 'examples/agents/react_agent.py'}"


@pytest.fixture()
def engine(memorised):
    """A fresh engine whose every generated Completion is also logged (the spy)."""
    from posttrain.rollout.engines.fast.engine import FastEngine

    model, tok = memorised
    eng = FastEngine(copy.deepcopy(model), tok, max_batch=8)
    log = []
    render = eng.finisher.render

    def spy(s):
        c = render(s)
        log.append((tuple(s.prompt), c))
        return c

    eng.finisher.render = spy
    return eng, tok, log


def test_token_capture_equals_what_the_engine_generated(engine):
    eng, tok, log = engine
    [traj] = asyncio.run(rollout_external(eng, tok, [calc_task()], AgentOptions(n=1, temperature=0.0),
                                          ExternalAgent(REACT), ServedProxy))
    assert traj.finish_reason == "answer", traj.verify
    assert [t.role for t in traj.turns] == ["assistant", "tool", "assistant"]
    gen = [c for _, c in log]
    assistant = [t for t in traj.turns if t.role == "assistant"]
    assert [t.token_ids for t in assistant] == [c.token_ids for c in gen]  # ids, bitwise
    assert [t.logprobs for t in assistant] == [c.logprobs for c in gen]  # logprobs, bitwise
    full = traj.prompt_ids + sum((t.token_ids for t in traj.turns), ())
    last_prompt, last = log[-1]
    assert full == last_prompt + last.token_ids  # the episode is one sequence: nothing re-tokenised
    assert log[0][0] == traj.prompt_ids
    assert [t.trainable for t in traj.turns] == [True, False, True]
    assert assistant[0].tool_call.name == "calculator" and assistant[1].text == ANSWER
    assert traj.verify.passed and traj.reward > 0.9
    assert traj.verify.details["proxy"]["versions"] == (0, 0) and not traj.verify.details["proxy"]["rerendered"]


def test_forced_tool_choice_is_captured_as_prompt_ids_and_the_chain_stays_exact(engine, tmp_path):
    """tool_choice forces the call's opening: its ids end the captured prompt (what the engine ran), the completion
    holds only sampled tokens, and prompt + completion is still the exact start of the next call's prompt."""
    eng, tok, log = engine
    agent = tmp_path / "forced.py"  # ReAct, with the first call forced to name the calculator
    agent.write_text(
        "import httpx, json, openai, os, sys\ntask = json.load(sys.stdin)\nc = openai.OpenAI(max_retries=0)\n"
        "msgs = list(task['messages'])\n"
        "m = c.chat.completions.create(model=os.environ['POSTTRAIN_MODEL'], messages=msgs, tools=task['tools'], "
        "tool_choice={'type': 'function', 'function': {'name': 'calculator'}}).choices[0].message\n"
        "call = m.tool_calls[0]\n"
        "obs = httpx.post(os.environ['POSTTRAIN_TOOLS_URL'] + '/' + call.function.name, "
        "json=json.loads(call.function.arguments), timeout=60).json()['output']\n"
        "msgs += [m.model_dump(exclude_none=True), {'role': 'tool', 'tool_call_id': call.id, 'content': obs}]\n"
        "print(c.chat.completions.create(model=os.environ['POSTTRAIN_MODEL'], messages=msgs, tools=task['tools'])"
        ".choices[0].message.content)\n")
    [traj] = asyncio.run(rollout_external(eng, tok, [calc_task()], AgentOptions(n=1, temperature=0.0),
                                          ExternalAgent(f"{sys.executable} {agent}"), ServedProxy))
    assert traj.finish_reason == "answer", traj.verify.details["proxy"]["agent"]
    forced = tuple(tok('<tool_call>{"name":"calculator","arguments":', add_special_tokens=False)["input_ids"])
    (p0, c0), (p1, c1) = log
    assert p0[-len(forced):] == forced and traj.prompt_ids == p0  # the forced ids are prompt ids, as the engine ran
    assert list(c0.token_ids) == tok('{"expression":"2*3"}}</tool_call>', add_special_tokens=False)["input_ids"] + [
        tok.eos_token_id]  # the rest of the memorised call: sampled
    assistant = [t for t in traj.turns if t.role == "assistant"]
    assert [t.token_ids for t in assistant] == [c0.token_ids, c1.token_ids]  # only sampled tokens, bitwise
    assert [t.logprobs for t in assistant] == [c0.logprobs, c1.logprobs]
    assert p1[: len(p0) + len(c0.token_ids)] == p0 + c0.token_ids  # prompt + completion == next prompt's start
    full = traj.prompt_ids + sum((t.token_ids for t in traj.turns), ())
    assert full == p1 + c1.token_ids and [t.trainable for t in traj.turns] == [True, False, True]
    assert assistant[0].tool_call.name == "calculator"  # parsed with the forced opening in front
    assert assistant[1].text == ANSWER and traj.verify.passed and not traj.verify.details["proxy"]["rerendered"]


def test_a_killed_agent_is_a_failed_episode_and_the_run_goes_on(engine, tmp_path):
    eng, tok, _ = engine
    flaky = tmp_path / "flaky.py"  # sample 0 solves the task, sample 1 is killed before it answers
    flaky.write_text(
        "import os, signal, sys, runpy\n"
        "if os.environ['OPENAI_BASE_URL'].split('-k')[1].startswith('1-'): os.kill(os.getpid(), signal.SIGKILL)\n"
        f"sys.argv = ['react']; runpy.run_path({str(ROOT / 'examples/agents/react_agent.py')!r}, "
        "run_name='__main__')\n")
    ok, killed = asyncio.run(rollout_external(eng, tok, [calc_task()], AgentOptions(n=2, temperature=0.0),
                                              ExternalAgent(f"{sys.executable} {flaky}"), ServedProxy))
    assert (ok.finish_reason, killed.finish_reason) == ("answer", "agent_error")
    assert ok.verify.passed
    assert not killed.verify.passed and killed.verify.status == "ok" and killed.reward == 0.0
    assert killed.verify.details["proxy"]["agent"]["code"] in (-9, 137)  # the signal, or the shell reporting it


def test_a_hung_agent_times_out_as_data(engine):
    eng, tok, _ = engine
    [traj] = asyncio.run(rollout_external(eng, tok, [calc_task()], AgentOptions(n=1),
                                          ExternalAgent("sleep 60", timeout_s=1.0), ServedProxy))
    assert traj.finish_reason == "time_budget" and not traj.verify.passed and not traj.infra_error
    assert traj.timings["total_s"] < 30  # the process group was killed, not waited for


def test_step_budget_is_recorded(engine, tmp_path):
    eng, tok, _ = engine
    loop = tmp_path / "loop.py"  # calls the model forever, never answers
    loop.write_text("import openai, os\nc = openai.OpenAI(max_retries=0)\n"
                    "while True:\n"
                    "    c.chat.completions.create(model='policy', messages=[{'role': 'user', 'content': 'What is 2*3?'}])\n")
    [traj] = asyncio.run(rollout_external(eng, tok, [calc_task()], AgentOptions(n=1, temperature=0.0),
                                          ExternalAgent(f"{sys.executable} {loop}", max_calls=2, timeout_s=30), ServedProxy))
    assert traj.finish_reason == "max_steps" and traj.verify.details["proxy"]["calls"] == 2
    assert traj.verify.details["proxy"]["rerendered"]  # same first message again: a rewritten history
    assert traj.num_steps == 1


def test_rl_batches_run_agent_external_through_the_proxy(engine):
    """`agent.external` in the run config routes multi-step tasks to the agent process (here an entry point)."""
    from posttrain.config import AgentConfig
    from posttrain.rollout.entry import rollout_options, rollout_scored
    from posttrain.verifiers.run import VerifierRunner

    eng, tok, log = engine
    cfg = AgentConfig(external={"entry": "examples.agents.react_agent:main"})
    opts = rollout_options(SamplingParams(temperature=0.0, n=1), cfg, proxy=ServedProxy)
    [traj] = asyncio.run(rollout_scored(eng, tok, [calc_task()], opts, VerifierRunner(None)))
    assert traj.verify.details["proxy"]["calls"] == 2 and traj.verify.passed and len(log) == 2


def test_a_terminal_task_runs_its_tools_in_the_episodes_sandbox_session(engine, tmp_path):
    """The agent's tool calls go to POSTTRAIN_TOOLS_URL, run in the task's session, and the verifier sees it."""
    from posttrain.sandbox.pool import SandboxPool
    from posttrain.types import Environment, Limits, Message, Spec, Task

    eng, tok, _ = engine
    task = Task(id="sh", domain="terminal", prompt=(Message("user", "Write hello to out.txt"),),
                verifier=Spec("terminal_checks", {"script": 'check made [ "$(cat out.txt)" = hello ]\n',
                                                  "names": ["made"]}),
                environment=Environment(files={"seed.txt": "x\n"}, tools=("shell",)),
                limits=Limits(max_steps=4, max_new_tokens=16, timeout_s=60.0), metadata={"needs_sandbox": True})
    agent = tmp_path / "sh_agent.py"  # asks the model once, then acts through the episode's tool URL
    agent.write_text("import httpx, json, openai, os, sys\ntask = json.load(sys.stdin)\n"
                     "openai.OpenAI(max_retries=0).chat.completions.create(model=os.environ['POSTTRAIN_MODEL'], "
                     "messages=task['messages'], tools=task['tools'])\n"
                     "r = httpx.post(os.environ['POSTTRAIN_TOOLS_URL'] + '/shell', "
                     "json={'cmd': 'echo hello > out.txt'}, timeout=60).json()\n"
                     "assert r['status'] == 'ok', r\n")

    async def main():
        pool = SandboxPool(concurrency=1)
        try:
            return await rollout_external(eng, tok, [task], AgentOptions(n=1, temperature=0.0),
                                          ExternalAgent(f"{sys.executable} {agent}"), ServedProxy, sandbox=pool)
        finally:
            await pool.close()

    [traj] = asyncio.run(main())
    assert traj.finish_reason == "answer" and traj.verify.passed, traj.verify.details["proxy"]["agent"]


@pytest.mark.parametrize("prompt,finish,last", [(SH_PROMPTS[0], "submit", "submit"),
                                                (SH_PROMPTS[1], "answer", None)])
def test_the_react_agent_solves_a_terminal_task_through_the_sandbox_session(memorised_terminal, prompt, finish,
                                                                            last):
    """examples/agents/react_agent.py on a terminal task: the model's shell call runs in the episode's sandbox
    session through POSTTRAIN_TOOLS_URL, the episode ends with submit (the model's call, or the agent's after a
    plain reply), and terminal_checks sees the file the model wrote."""
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.sandbox.pool import SandboxPool

    model, tok = memorised_terminal
    eng = FastEngine(copy.deepcopy(model), tok, max_batch=4)
    submitted = []
    score = ExternalRunner._score

    async def spy(self, ep, *a, **kw):
        submitted.append([name for _, name, _, _ in ep.executions])
        return await score(self, ep, *a, **kw)

    async def main():
        pool = SandboxPool(concurrency=1)
        try:
            return await rollout_external(eng, tok, [sh_task(prompt=prompt)], AgentOptions(n=1, temperature=0.0),
                                          ExternalAgent(REACT), ServedProxy, sandbox=pool)
        finally:
            await pool.close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ExternalRunner, "_score", spy)
        [traj] = asyncio.run(main())
    assert traj.finish_reason == finish, traj.verify.details["proxy"]["agent"]
    assert traj.verify.passed and traj.verify.details["passed"] == ("made",), traj.verify
    calls = [t.tool_call for t in traj.turns if t.role == "assistant"]
    assert [c and c.name for c in calls] == ["shell", last] and calls[0].arguments["cmd"] == "echo hello > out.txt"
    assert submitted == [["shell", "submit"]]  # what ran through POSTTRAIN_TOOLS_URL, in order
    shell = next(t for t in traj.turns if t.role == "tool")  # the session's own result, recorded on the trajectory
    assert not shell.trainable and shell.exec_result is not None and shell.exec_result.status == "ok"
    assert traj.turns[0].text == SHELL_CALL and traj.verify.details["proxy"]["chained"] == 2


def test_the_react_rl_example_trains_through_the_proxy_cli(tmp_path):
    """examples/agents/react_rl.yaml, reduced, through the real CLI: the agent recipe's warm-up, then RL
    steps whose episodes are agent processes behind the proxy."""
    import json
    import subprocess

    out = tmp_path / "run"
    small = ["sft.steps=2", "recipe.agent.stop_at=null", "recipe.agent.habits=null", "recipe.agent.n_train=8",
             "recipe.agent.n_eval=2", "recipe.agent.val_tasks=2", "recipe.agent.step_samples=1",
             "recipe.agent.rl_minutes=5", "rl.steps=1", "rl.prompts_per_step=1", "rl.group_size=2", "threads=1"]
    r = run_cli(["quickstart", "--agent", "--config",
                        "examples/agents/react_rl.yaml", "--out", str(out), *small], cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "agent_summary.json").read_text())["rl_steps"] == 1
    import sqlite3

    rows = sqlite3.connect(out / "trajectories.sqlite").execute("select data from trajectories").fetchall()
    proxied = [d for (d,) in rows if '"proxy"' in d]  # verdict details written by the external-agent rollout
    assert len(proxied) >= 2
