"""`python_tests`: run a model-written Python expression on test inputs in the sandbox.

The sandbox only computes: it evaluates `f = lambda <arg>: (<answer>)` on each test
input and prints the results as JSON. The expected outputs never enter the sandbox;
the host compares them. So an answer that prints a fake result can at best claim
values, which pass only if they are the right values. Reward = fraction of tests passed.

Not protected against: answers that are correct only on the shown test inputs (the
tests are the specification). Syntax errors are caught on the host with `compile()`,
which parses but never executes, so they cost no sandbox run.
"""

from __future__ import annotations

import json

from posttrain.registry import verifier
from posttrain.types import ExecLimits, Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

RUNNER = r'''
import json, sys
src = open("answer.py").read()
inputs = json.loads(open("inputs.json").read())
out = []
try:
    f = eval(compile("lambda %s: (%s)" % (sys.argv[1], src), "answer.py", "eval"), {})
except BaseException as e:
    print("\n@@RESULT@@" + json.dumps({"error": type(e).__name__}))
    raise SystemExit(0)
for x in inputs:
    try:
        v = f(x)
        out.append({"value": v if isinstance(v, (int, float, str, bool)) else repr(v)})
    except BaseException as e:
        out.append({"error": type(e).__name__})
print("\n@@RESULT@@" + json.dumps(out))
'''


def _values_equal(got: object, want: object) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got == want and type(got) is type(want)
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return abs(got - want) <= 1e-9 * max(1.0, abs(want))
    return got == want


@verifier("python_tests")
class PythonTests:
    def __init__(self, tests: list[list], arg: str = "x", wall_s: float = 5.0, memory_mb: int = 256) -> None:
        self.tests = [(t[0], t[1]) for t in tests]
        self.arg = arg
        self.limits = ExecLimits(wall_s=wall_s, cpu_s=wall_s, memory_mb=memory_mb, output_bytes=65536)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        src = trajectory.completion_text.strip()
        if not src:
            return VerifyResult.fail("empty answer")
        try:
            compile(f"lambda {self.arg}: ({src})", "answer.py", "eval")
        except (SyntaxError, ValueError) as e:
            return VerifyResult.fail("syntax error", error=str(e)[:200])
        if ctx.sandbox is None:
            return VerifyResult.infra("no sandbox configured for python_tests")
        files = {"answer.py": src, "inputs.json": json.dumps([x for x, _ in self.tests]), "runner.py": RUNNER}
        res = await ctx.sandbox.exec(["python3", "-I", "runner.py", self.arg], files=files, limits=self.limits)
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error: {res.error or res.stderr[:200]}")
        if res.status in ("timeout", "oom", "output_limit"):
            return VerifyResult.fail(res.status, exec_status=res.status)
        marker = res.stdout.rfind("@@RESULT@@")
        if marker < 0:
            return VerifyResult.fail("no result from the test runner", stderr=res.stderr[-300:])
        try:
            out = json.loads(res.stdout[marker + len("@@RESULT@@"):].strip())
        except json.JSONDecodeError:
            return VerifyResult.fail("malformed result from the test runner")
        if isinstance(out, dict):
            return VerifyResult.fail(f"answer raised {out.get('error')}")
        if not isinstance(out, list) or len(out) != len(self.tests):
            return VerifyResult.fail("malformed result from the test runner")
        passed = [isinstance(o, dict) and "value" in o and _values_equal(o["value"], want)
                  for o, (_, want) in zip(out, self.tests)]
        score = sum(passed) / len(passed)
        return VerifyResult(score, all(passed), {"passed": sum(passed), "total": len(passed)})
