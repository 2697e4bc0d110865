"""`python_tests`: run a model-written Python expression on test inputs in the sandbox.

The sandbox only computes: it evaluates `f = lambda <arg>: (<answer>)` on each test
input and prints the results as JSON. The expected outputs never enter the sandbox;
the host compares them. So an answer that prints a fake result can at best claim
values, which pass only if they are the right values. Reward = fraction of tests passed.

Batching: `verify_batch` scores all distinct answers of one task (a GRPO group) in one
sandbox execution; inside it, every answer runs in its own forked child with its own
timeout, stdout closed, reporting over its own pipe. A group whose execution fails as a
whole falls back to one execution per answer, so one hostile answer cannot cost its
siblings their score.

Not protected against: answers that are correct only on the shown test inputs (the
tests are the specification); inside a batch, an answer that itself computes the right
values could in principle forge a sibling's report (it cannot forge a pass for itself
without being right). Syntax errors are caught on the host with `compile()`, which
parses but never executes, so they cost no sandbox run.
"""

from __future__ import annotations

import json

from posttrain.registry import verifier
from posttrain.types import ExecLimits, Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

# Shared by both in-sandbox scripts (the sandbox cannot import posttrain): the answer
# becomes `lambda <arg>: (<answer>)`; each input gives a value or the exception's name.
APPLY = r'''
def apply_answer(src, arg, inputs):
    f = eval(compile("lambda %s: (%s)" % (arg, src), "answer.py", "eval"), {})
    out = []
    for x in inputs:
        try:
            v = f(x)
            out.append({"value": v if isinstance(v, (int, float, str, bool)) else repr(v)})
        except BaseException as e:
            out.append({"error": type(e).__name__})
    return out
'''

RUNNER = APPLY + r'''
import json, sys
src = open("answer.py").read()
inputs = json.loads(open("inputs.json").read())
try:
    out = apply_answer(src, sys.argv[1], inputs)
except BaseException as e:
    print("\n@@RESULT@@" + json.dumps({"error": type(e).__name__}))
    raise SystemExit(0)
print("\n@@RESULT@@" + json.dumps(out))
'''


BATCH_RUNNER = APPLY + r'''
import json, os, select, signal, sys, time
arg, per_s = sys.argv[1], float(sys.argv[2])
inputs = json.loads(open("inputs.json").read())
answers = json.loads(open("answers.json").read())

def child(src, w):
    fd = os.open(os.devnull, os.O_RDWR)
    os.dup2(fd, 0), os.dup2(fd, 1), os.dup2(fd, 2)
    try:
        out = apply_answer(src, arg, inputs)
    except BaseException as e:
        out = {"error": type(e).__name__}
    os.write(w, json.dumps(out).encode()[:65536])
    os._exit(0)

results = []
for src in answers:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(src, w)
    os.close(w)
    buf, deadline = b"", time.monotonic() + per_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    try:
        results.append(json.loads(buf.decode()) if buf else {"error": "timeout or crash"})
    except ValueError:
        results.append({"error": "malformed report"})
print("\n@@BATCH@@" + json.dumps(results))
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
        return await self._run_one(src, ctx)

    def _score(self, out: object) -> VerifyResult:
        if isinstance(out, dict):
            return VerifyResult.fail(f"answer raised {out.get('error')}")
        if not isinstance(out, list) or len(out) != len(self.tests):
            return VerifyResult.fail("malformed result from the test runner")
        passed = [isinstance(o, dict) and "value" in o and _values_equal(o["value"], want)
                  for o, (_, want) in zip(out, self.tests)]
        score = sum(passed) / len(passed)
        return VerifyResult(score, all(passed), {"passed": sum(passed), "total": len(passed)})

    async def verify_batch(self, task: Task, answers: list[str], ctx: VerifyContext) -> list[VerifyResult]:
        """Score many answers to this task in one sandbox run (each in its own child)."""
        if ctx.sandbox is None or len(answers) < 2:
            return [await self(task, _answer_traj(task, a), ctx) for a in answers]
        ok_src = []
        for a in answers:
            try:
                compile(f"lambda {self.arg}: ({a.strip()})", "answer.py", "eval")
                ok_src.append(a.strip())
            except (SyntaxError, ValueError):
                ok_src.append(None)
        runnable = [a for a in ok_src if a]
        outs: list = []
        if runnable:
            files = {"answers.json": json.dumps(runnable), "inputs.json": json.dumps([x for x, _ in self.tests]),
                     "runner.py": BATCH_RUNNER}
            lim = ExecLimits(wall_s=self.limits.wall_s * 2, cpu_s=self.limits.cpu_s * 2, memory_mb=self.limits.memory_mb,
                             output_bytes=1 << 20)
            per = str(min(2.0, self.limits.wall_s))
            res = await ctx.sandbox.exec(["python3", "-I", "runner.py", self.arg, per], files=files, limits=lim)
            marker = res.stdout.rfind("@@BATCH@@")
            try:
                outs = json.loads(res.stdout[marker + 9:]) if res.status == "ok" and marker >= 0 else []
            except json.JSONDecodeError:
                outs = []
            if len(outs) != len(runnable):  # the batch failed as a whole: isolate every answer
                return [await self(task, _answer_traj(task, a), ctx) for a in answers]
        it = iter(outs)
        return [self._score(next(it)) if a else VerifyResult.fail("syntax error") for a in ok_src]

    async def _run_one(self, src: str, ctx: VerifyContext) -> VerifyResult:
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
        return self._score(out)


def _answer_traj(task: Task, answer: str) -> Trajectory:
    from posttrain.types import Turn

    return Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", answer),))
