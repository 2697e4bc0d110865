"""Adversarial: no HumanEval exploit scores above 0 through VerifierRunner (the RL path),
in pooled and fresh sandbox modes, while honest answers still score 1.0."""

import asyncio
import dataclasses

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.tasks import generate_domain
from posttrain.types import Spec, Task, Trajectory, Turn
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.humaneval import HumanEvalTests
from posttrain.verifiers.run import VerifierRunner

from .humaneval_attacks import ATTACKS, HANGS, HELPERS, completion

# poly / encode_cyclic / encode_shift: tests that call helpers defined in the prompt
TASK_IDS = ("HumanEval-0", "HumanEval-32", "HumanEval-38", "HumanEval-50")
TASKS = [dataclasses.replace(t, verifier=Spec("humaneval", {**t.verifier.args, "wall_s": 2.0}))  # hangs end sooner
         for t in generate_domain("humaneval", 164, 0) if t.id in TASK_IDS]
MODES = ("pooled", "fresh")


def traj(task: Task, text: str) -> Trajectory:
    return Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", text),), finish_reason="stop")


def verify_all(mode: str, items: list[tuple[Task, str]]) -> list:
    async def go():
        pool = SandboxPool(mode=mode)
        try:
            runner = VerifierRunner(pool)
            return [o.verify for o in await runner.verify_all({t.id: t for t, _ in items}, [traj(t, s) for t, s in items])]
        finally:
            await pool.close()

    return asyncio.run(go())


@pytest.fixture(scope="module", params=MODES)
def attack_results(request):
    items = [(t, completion(a, t.metadata["entry_point"])) for a in ATTACKS for t in TASKS]
    out = verify_all(request.param, items)
    return {a: out[i * len(TASKS):(i + 1) * len(TASKS)] for i, a in enumerate(ATTACKS)}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_exploit_scores_zero_on_every_task(attack_results, attack):
    results = attack_results[attack]
    assert [r.score for r in results] == [0.0] * len(TASKS), [r.details for r in results]
    assert not any(r.passed for r in results)
    # the model's fault: scored, not an infra error. An attack that runs to the wall limit
    # may instead be judged "host overloaded" by the pool when other work starves it of CPU.
    ok = [r.status == "ok" or (attack in HANGS and "overloaded" in r.reason) for r in results]
    assert all(ok), [(r.status, r.reason) for r in results]


@pytest.mark.parametrize("mode", MODES)
def test_canonical_and_full_function_answers_still_pass(mode):
    he0 = next(t for t in TASKS if t.id == "HumanEval-0")
    full = ("```python\nfrom typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
            + he0.oracle + "```\n")
    items = [(t, t.oracle) for t in TASKS] + [(he0, full)]
    assert [r.score for r in verify_all(mode, items)] == [1.0] * len(items)


# The candidate scans everything it can reach (its frames, heap, /proc/*/{cmdline,environ,
# fd,mem}) for 32-hex strings and returns what it found; the trusted test then checks that
# neither the run's token nor a secret in the test source is among them.
PEEK_TEST = '''
SECRET = "5ec7e75ec7e75ec7e75ec7e75ec7e7aa"
def check(candidate):
    import sys
    f = sys._getframe()
    while "token" not in f.f_locals:
        f = f.f_back
    found = candidate()
    assert "c0ffeec0ffeec0ffeec0ffeec0ffee00" in found  # the scan ran and sees the candidate's own memory
    assert f.f_locals["token"] not in found and SECRET not in found
'''
PEEK_PROGRAM = HELPERS + '''
MINE = "c0ffeec0ffeec0ffeec0ffeec0ffee00"
def peek():
    return sorted(_tokens())
'''


@pytest.mark.parametrize("mode", MODES)
def test_candidate_memory_and_proc_hold_neither_token_nor_tests(mode):
    v = HumanEvalTests(test=PEEK_TEST, entry_point="peek", prompt="def peek():\n    '''scan'''\n")
    res = run_verifier(mode, v, PEEK_PROGRAM)
    assert res.score == 1.0, res.details


RAISE_TEST = '''
def check(candidate):
    try:
        candidate(1)
    except ValueError:
        return
    raise AssertionError("no ValueError")
'''


@pytest.mark.parametrize("program, score", [
    ("def f(x):\n    raise ValueError('boom')\n", 1.0),  # builtin type: re-raised as itself
    ("class E(ValueError):\n    def __str__(s): return 'boom'\ndef f(x):\n    raise E()\n", 0.0),  # not a builtin
])
def test_exceptions_reach_the_test_as_builtin_types_only(program, score):
    v = HumanEvalTests(test=RAISE_TEST, entry_point="f", prompt="def f(x):\n    '''raise'''\n")
    assert run_verifier("pooled", v, program).score == score


def run_verifier(mode: str, v: HumanEvalTests, program: str):
    t = TASKS[0]

    async def go():
        pool = SandboxPool(mode=mode)
        try:
            return await v(t, traj(t, program), VerifyContext(sandbox=pool))
        finally:
            await pool.close()

    return asyncio.run(go())
