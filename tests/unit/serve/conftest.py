"""Shared fixtures: a tiny model that memorised a calculator episode, served by uvicorn.

The model (memorise.py) answers the task "What is 2*3?" with a calculator tool call and,
once the tool's output is appended, with "The answer is 6." (greedy), so tool_calls,
multi-turn capture and the ReAct example run against real generated tokens.
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


@pytest.fixture(scope="session")
def memorised():
    from posttrain.models.tiny import build_tokenizer
    from tests.unit.serve.memorise import memorised_tiny

    tok = build_tokenizer()

    def ids(msgs):
        return tok(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False),
                   add_special_tokens=False)["input_ids"]

    def reply(text):
        return tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

    first = [{"role": "user", "content": "What is 2*3?"}]
    second = first + [{"role": "assistant", "content": CALL}, {"role": "tool", "content": observation()}]
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tok = memorised_tiny([(ids(first), reply(CALL)), (ids(second), reply(ANSWER))])
    finally:
        torch.set_num_threads(n)
    return model, tok


@pytest.fixture(scope="module")
def served(memorised):
    """(base url, ServeState) of a live server on a free loopback port."""
    import copy

    from posttrain.rollout.fast.engine import FastEngine
    from posttrain.serve.app import build_app
    from posttrain.serve.server import BackgroundServer
    from posttrain.serve.service import ServeState

    model, tok = memorised
    state = ServeState.create(FastEngine(copy.deepcopy(model), tok, max_batch=16), tok, "tiny")
    with BackgroundServer(build_app(state)) as url:
        yield url, state
    state.close()
