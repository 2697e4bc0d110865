"""Test doubles for the agent loop: a scripted engine driven by a policy function.

The engine is a real `Engine` (token ids in, token ids + logprobs out) whose replies come
from `policy(conversation_text) -> reply_text`, so tests control the model's behaviour
exactly while everything else (parsing, tools, sandbox, verifiers) is the real thing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Sequence

import pytest

from posttrain.rollout.engine import Completion, GenRequest
from posttrain.types import Environment, Limits, Message, Spec, Task


class ScriptedEngine:
    def __init__(self, tok, policy: Callable[[str], str], max_len: int = 4096, delay_s: float = 0.0) -> None:
        self.tok, self.policy, self.max_len, self.delay_s = tok, policy, max_len, delay_s
        self.weights_version = 0
        self.calls: list[tuple[float, float, int]] = []  # (start, end, batch size)

    def generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        t0 = time.monotonic()
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for r in requests:
            text = self.tok.decode(list(r.prompt_ids), skip_special_tokens=False)
            reply = self.policy(text)
            ids = list(self.tok(reply, add_special_tokens=False)["input_ids"]) + [self.tok.eos_token_id]
            reason = "stop"
            if len(ids) > r.params.max_new_tokens:
                ids, reason = ids[: r.params.max_new_tokens], "length"
            out.append(Completion(r.id, 0, tuple(ids), tuple([-0.5] * len(ids)), reply, reason))
        self.calls.append((t0, time.monotonic(), len(requests)))
        return out

    def load_weights(self, state, version: int) -> None:
        self.weights_version = version


@pytest.fixture(scope="session")
def tok():
    from posttrain.models.tiny import build_tokenizer

    return build_tokenizer()


def calc_task(i: int = 0, a: int = 4821, b: int = 937, max_steps: int = 4, timeout_s: float = 30.0) -> Task:
    ans = str(a * b)
    ver = Spec("weighted", {"parts": [
        {"verifier": {"name": "math_answer", "args": {"answer": ans}}, "weight": 0.7},
        {"verifier": {"name": "tool_use", "args": {"required": ["calculator"]}}, "weight": 0.3}]})
    return Task(id=f"calc-{i}", domain="tools", prompt=(Message("user", f"What is {a} * {b}?"),), verifier=ver,
                environment=Environment(tools=("calculator",)),
                limits=Limits(max_steps=max_steps, max_new_tokens=128, timeout_s=timeout_s),
                metadata={"answer": ans})


def shell_task(i: int = 0, max_steps: int = 6, timeout_s: float = 60.0) -> Task:
    script = "check made [ \"$(cat out.txt)\" = hello ]\n"
    return Task(id=f"sh-{i}", domain="terminal", prompt=(Message("user", "Write hello to out.txt"),),
                verifier=Spec("terminal_checks", {"script": script, "names": ["made"]}),
                environment=Environment(files={"seed.txt": "x\n"}, tools=("shell",)),
                limits=Limits(max_steps=max_steps, max_new_tokens=256, timeout_s=timeout_s),
                metadata={"needs_sandbox": True})


def steps_policy(*replies):
    """Reply i to the conversation's i-th assistant turn; the last reply repeats."""
    return lambda text: replies[min(text.count("<|assistant|>") - 1, len(replies) - 1)]


def run(coro):
    return asyncio.run(coro)
