"""HumanEval answers in the shapes real instruct models write them (SmolLM2's replies to
`posttrain eval --suite humaneval`): a right answer passes in every shape, a wrong one
fails in every shape, and no choice of code block turns a wrong answer into a pass."""

import asyncio

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.tasks import generate_domain
from posttrain.types import Task, Trajectory, Turn
from posttrain.verifiers.humaneval import build_program, code_candidates
from posttrain.verifiers.run import VerifierRunner

HE0 = next(t for t in generate_domain("humaneval", 164, 0) if t.id == "HumanEval-0")
DEF = "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
RIGHT = HE0.oracle  # the canonical body
WRONG = "    return False\n"


def shapes(body: str) -> dict[str, str]:
    full = DEF + body
    return {
        "continuation": body,
        "continuation, closing fence, prose": body + "```\n\nThis function compares every pair.",
        "full definition, closing fence, prose": full + "```\n\nThis function uses a double loop.",
        "full definition, then prose": full + "\nThis function returns True when two numbers are close.\n",
        "tagged fence never closed": "Here is the code:\n```python\nfrom typing import List\n\n" + full,
        "bare fence never closed": "Here is the code:\n```\n" + full,
        "two blocks, the entry point's second": "```python\ndef helper():\n    pass\n```\nand\n```python\n" + full + "```\n",
        "block, then prose with a stray fence": "```python\n" + full + "```\nUse it like ``` this.",
    }


def verify(items: list[tuple[Task, str]]) -> list[float]:
    async def go():
        pool = SandboxPool(mode="pooled")
        try:
            trajs = [Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", s),), finish_reason="stop")
                     for t, s in items]
            return [o.verify.score for o in await VerifierRunner(pool).verify_all({HE0.id: HE0}, trajs)]
        finally:
            await pool.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def scores():
    right, wrong = shapes(RIGHT), shapes(WRONG)
    names = list(right)
    out = verify([(HE0, right[n]) for n in names] + [(HE0, wrong[n]) for n in names])
    return {"right": dict(zip(names, out[: len(names)])), "wrong": dict(zip(names, out[len(names):]))}


@pytest.mark.parametrize("shape", list(shapes(RIGHT)))
def test_a_right_answer_passes_in_every_shape(scores, shape):
    assert scores["right"][shape] == 1.0


@pytest.mark.parametrize("shape", list(shapes(WRONG)))
def test_a_wrong_answer_fails_in_every_shape(scores, shape):
    assert scores["wrong"][shape] == 0.0


def test_the_block_defining_the_entry_point_wins_over_a_later_one():
    reply = "```python\n" + DEF + WRONG + "```\nor\n```python\nprint('unrelated')\n```\n"
    program = build_program(HE0.verifier.args["prompt"], reply, "has_close_elements")
    assert "return False" in program and "unrelated" not in program


def test_only_the_models_own_text_is_ever_a_candidate():
    reply = "Sure.\n```python\n" + DEF + RIGHT + "```\nDone ``` here"
    assert all(c in reply for c in code_candidates(reply, "has_close_elements"))


def test_a_reply_that_never_compiles_is_reported_as_a_syntax_error():
    async def go():
        pool = SandboxPool(mode="pooled")
        try:
            traj = Trajectory(HE0.id, HE0.version, HE0.domain, (), (Turn("assistant", "```python\ndef (:\n```"),),
                              finish_reason="stop")
            return (await VerifierRunner(pool).verify_all({HE0.id: HE0}, [traj]))[0].verify
        finally:
            await pool.close()

    res = asyncio.run(go())
    assert res.score == 0.0 and res.reason == "syntax error"
