"""`python_tests`: run a model-written Python expression on test inputs in the sandbox.

The sandbox only computes: it evaluates `f = lambda <arg>: (<answer>)` on each test
input and prints the results in the strict plain-data encoding (`plain_data`). The
expected outputs never enter the sandbox; the host decodes the results with builtins
only and compares them there. So an answer that prints a fake result can at best claim
values, which pass only if they are the right values; an object with a forgiving
`__eq__`, or an int where a str is expected, is not the right value. Reward = fraction
of tests passed. An answer in a ```python fence is taken from the (last) fence.

Batching: `verify_batch` scores the distinct answers of one task (a GRPO group) as one
sandbox execution *per answer*, run concurrently. Each answer is its own isolation unit
(own pid namespace, own workspace, own interpreter state), so it cannot read its
siblings' code, copy their behaviour, or kill them: its score is exactly what it gets
alone. The older one-execution batch (answers forked side by side, answers.json in the
shared workspace) let an answer do all three.

Not protected against: answers that are correct only on the shown test inputs (the
tests are the specification). Syntax errors are caught on the host with `compile()`,
which parses but never executes, so they cost no sandbox run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import marshal
import re
from functools import lru_cache

from posttrain.registry import verifier
from posttrain.types import ExecLimits, Task, Trajectory, VerifyResult, thaw
import posttrain.verifiers.plain_data as plain_data
from posttrain.verifiers.base import BatchVerifier, VerifyContext

# In the sandbox (no posttrain there): the job arrives on stdin; every input gives
# ("v", value), ("bad", "not plain data") for any other value, or ("e", exception name).
RUNNER = plain_data.SOURCE + r'''
import sys

def _name(e):
    n = getattr(type(e), "__name__", "Exception")
    return n[:100] if type(n) is str else "Exception"

def _main():
    job = _json.loads(sys.stdin.read())
    try:
        f = eval(compile("lambda %s: (%s)" % (job["arg"], job["src"]), "answer.py", "eval"), {})
    except BaseException as e:
        return [("e", _name(e))]
    out = []
    for x in job["inputs"]:
        try:
            v = f(x)
        except BaseException as e:
            out.append(("e", _name(e)))
            continue
        try:
            to_tree(v)
            out.append(("v", v))
        except BaseException:
            out.append(("bad", "not plain data"))
    return out

_out = _main()
sys.stdout.write("\n@@RESULT@@" + dumps(_out).decode() + "\n")
sys.stdout.flush()
'''



@lru_cache(maxsize=1)
def runner_pyc() -> bytes:
    """RUNNER compiled once on the host, as a .pyc the sandbox's `python3 runner.pyc` loads
    without compiling it again for every answer (the sandbox runs this same interpreter)."""
    code = compile(RUNNER, "runner.py", "exec", dont_inherit=True)
    return bytes(importlib.util.MAGIC_NUMBER) + b"\0" * 12 + marshal.dumps(code)


_FENCE = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)
_MARK = "@@RESULT@@"


def answer_source(text: str) -> str:
    """The expression to evaluate: the last ```python fence if there is one, else the text."""
    fenced = _FENCE.findall(text)
    return (fenced[-1] if fenced else text).strip()


def _values_equal(got: object, want: object) -> bool:
    """JSON semantics (a spec's expected values are JSON): a tuple equals a list; bool is not
    a number; numbers within 1e-9 relative. Both sides are builtins: no foreign `__eq__`."""
    if type(got) is bool or type(want) is bool:
        return type(got) is type(want) and got == want
    if type(got) in (int, float) and type(want) in (int, float):
        return abs(got - want) <= 1e-9 * max(1.0, abs(want))
    if type(got) in (list, tuple) and type(want) in (list, tuple):
        return len(got) == len(want) and all(_values_equal(g, w) for g, w in zip(got, want))
    if type(got) is dict and type(want) is dict:
        return got.keys() == want.keys() and all(_values_equal(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


@verifier("python_tests", answer_format="code")
class PythonTests(BatchVerifier):
    def __init__(self, tests: list[list], arg: str = "x", wall_s: float = 5.0, memory_mb: int = 256) -> None:
        self.tests = [(thaw(t[0]), thaw(t[1])) for t in tests]  # frozen spec args -> JSON-like lists
        self.arg = arg
        self.limits = ExecLimits(wall_s=wall_s, cpu_s=wall_s, memory_mb=memory_mb, output_bytes=1 << 20)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        src = answer_source(trajectory.completion_text)
        if not src:
            return VerifyResult.fail("empty answer")
        try:
            compile(f"lambda {self.arg}: ({src})", "answer.py", "eval")
        except (SyntaxError, ValueError) as e:
            return VerifyResult.fail("syntax error", error=str(e)[:200])
        if ctx.sandbox is None:
            return VerifyResult.infra("no sandbox configured for python_tests")
        return await self._run_one(src, ctx)

    async def verify_batch(self, task: Task, answers: list[str], ctx: VerifyContext) -> list[VerifyResult]:
        """Score many answers to this task: one isolated sandbox execution each, concurrently."""
        return list(await asyncio.gather(*(self(task, _answer_traj(task, a), ctx) for a in answers)))

    def _score(self, out: object) -> VerifyResult:
        if type(out) is not list or not all(type(o) is tuple and len(o) == 2 for o in out):
            return VerifyResult.fail("malformed result from the test runner")
        if len(out) == 1 and len(self.tests) != 1 and out[0][0] == "e":
            return VerifyResult.fail(f"answer raised {out[0][1]}")
        if len(out) != len(self.tests):
            return VerifyResult.fail("malformed result from the test runner")
        passed = [kind == "v" and _values_equal(v, want) for (kind, v), (_, want) in zip(out, self.tests)]
        score = sum(passed) / len(passed)
        return VerifyResult(score, all(passed), {"passed": sum(passed), "total": len(passed)})

    async def _run_one(self, src: str, ctx: VerifyContext) -> VerifyResult:
        job = json.dumps({"src": src, "arg": self.arg, "inputs": [x for x, _ in self.tests]})
        res = await ctx.sandbox.exec(["python3", "runner.pyc"], files={"runner.pyc": runner_pyc()}, stdin=job, limits=self.limits)
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error: {res.error or res.stderr[:200]}")
        if res.status in ("timeout", "oom", "output_limit"):
            return VerifyResult.fail(res.status, exec_status=res.status)
        marker = res.stdout.rfind(_MARK)
        if marker < 0:
            return VerifyResult.fail("no result from the test runner", stderr=res.stderr[-300:])
        try:
            out = plain_data.loads(res.stdout[marker + len(_MARK):].strip().encode())
        except ValueError:
            return VerifyResult.fail("malformed result from the test runner")
        return self._score(out)


def _answer_traj(task: Task, answer: str) -> Trajectory:
    from posttrain.types import Turn

    return Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", answer),))
