"""Shared fixtures: a tiny model that memorised a calculator episode, served by uvicorn.

The model (memorise.py) answers the task "What is 2*3?" with a calculator tool call and,
once the tool's output is appended, with "The answer is 6." (greedy), so tool_calls,
multi-turn capture and the ReAct example run against real generated tokens.
`memorised_terminal` does the same for terminal tasks (`sh_task`): a shell call that
writes out.txt, then, after its (empty) output, a submit call (prompt SH_PROMPTS[0]) or
the plain reply "Done." (SH_PROMPTS[1]).
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from posttrain.types import Environment, Limits, Message, Spec, Task

CALL = '<tool_call>{"name":"calculator","arguments":{"expression":"2*3"}}</tool_call>'
ANSWER = "The answer is 6."
TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Evaluate arithmetic.",
                                           "parameters": {"type": "object", "properties": {
                                               "expression": {"type": "string"}}, "required": ["expression"]}}}]


def calc_task(i: int = 0) -> Task:
    ver = Spec("weighted", {"parts": [
        {"verifier": {"name": "math_answer", "args": {"answer": "6"}}, "weight": 0.7},
        {"verifier": {"name": "tool_use", "args": {"required": ["calculator"]}}, "weight": 0.3}]})
    return Task(id=f"calc-{i}", domain="tools", prompt=(Message("user", "What is 2*3?"),), verifier=ver,
                environment=Environment(tools=("calculator",)),
                limits=Limits(max_steps=4, max_new_tokens=96, timeout_s=60.0), metadata={"answer": "6"})


def observation() -> str:
    from posttrain.rollout.agent.tools import execute, get_tool

    return asyncio.run(execute(get_tool("calculator"), {"expression": "2*3"}, {})).text


SHELL_CALL = '<tool_call>{"name":"shell","arguments":{"cmd":"echo hello > out.txt"}}</tool_call>'
SUBMIT_CALL = '<tool_call>{"name":"submit","arguments":{}}</tool_call>'


SH_PROMPTS = ("Write hello to out.txt", "Make out.txt say hello")


def sh_task(i: int = 0, prompt: str = SH_PROMPTS[0]) -> Task:
    """A terminal task: write hello to out.txt in the sandbox session (checked there)."""
    return Task(id=f"sh-{i}", domain="terminal", prompt=(Message("user", prompt),),
                verifier=Spec("terminal_checks", {"script": 'check made [ "$(cat out.txt)" = hello ]\n',
                                                  "names": ["made"]}),
                environment=Environment(files={"seed.txt": "x\n"}, tools=("shell",)),
                limits=Limits(max_steps=4, max_new_tokens=96, timeout_s=60.0), metadata={"needs_sandbox": True})


def _memorise(*episodes: tuple[str, list[tuple[str, str]]]):
    """The tiny model fitted, for each (user, steps), to answer `user` with steps[0][0], then, after each tool
    output steps[i][1], with steps[i + 1][0] (greedy), as the proxy renders the conversation."""
    from posttrain.models.tiny import build_tokenizer
    from tests.unit.serve.memorise import memorised_tiny

    tok = build_tokenizer()

    def ids(msgs):
        return tok(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False),
                   add_special_tokens=False)["input_ids"]

    pairs = []
    for user, steps in episodes:
        msgs = [{"role": "user", "content": user}]
        for reply, obs in steps:
            pairs.append((ids(msgs), tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]))
            msgs = msgs + [{"role": "assistant", "content": reply}, {"role": "tool", "content": obs}]
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return memorised_tiny(pairs)
    finally:
        torch.set_num_threads(n)


@pytest.fixture(scope="session")
def memorised():
    return _memorise(("What is 2*3?", [(CALL, observation()), (ANSWER, "")]))


@pytest.fixture(scope="session")
def memorised_terminal():
    return _memorise((SH_PROMPTS[0], [(SHELL_CALL, ""), (SUBMIT_CALL, "")]),  # echo > file prints nothing
                     (SH_PROMPTS[1], [(SHELL_CALL, ""), ("Done.", "")]))


@pytest.fixture(scope="module")
def served(memorised):
    """(base url, ServeState) of a live server on a free loopback port."""
    import copy

    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.serve.app import build_app
    from posttrain.serve.server import BackgroundServer
    from posttrain.serve.service import ServeState

    model, tok = memorised
    state = ServeState.create(FastEngine(copy.deepcopy(model), tok, max_batch=16), tok, "tiny")
    with BackgroundServer(build_app(state)) as url:
        yield url, state
    state.close()
