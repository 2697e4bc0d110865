"""Adversarial: code that tries to fake a pass must not pass."""

import asyncio
import dataclasses

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.tasks import generate_domain
from posttrain.types import Spec
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.compose import verify

from .helpers import answer

_P = next(t for t in generate_domain("humaneval", 164, 0) if t.id == "HumanEval-0")
PROBLEM = dataclasses.replace(_P, verifier=Spec("humaneval", {**_P.verifier.args, "wall_s": 2.0}))  # the busy loop ends sooner


def run(text):
    async def go():
        pool = SandboxPool()
        try:
            return await verify(PROBLEM, answer(PROBLEM, text), VerifyContext(sandbox=pool))
        finally:
            await pool.close()

    return asyncio.run(go())


@pytest.mark.parametrize("cheat", [
    "    import sys; sys.exit(0)\n",
    "    import os; os._exit(0)\n",
    "    print('@@PASS@@'); raise SystemExit(0)\n",
    "    while True: pass\n",
])
def test_humaneval_cheats_do_not_pass(cheat):
    assert run(cheat).score == 0.0


def test_humaneval_full_function_completion_passes():
    full = "```python\ndef has_close_elements(numbers, threshold):\n" + PROBLEM.oracle + "```"
    assert run(full).score == 1.0
