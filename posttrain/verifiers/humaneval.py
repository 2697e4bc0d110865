"""`humaneval`: run a HumanEval problem's unit tests on the model's code, in the sandbox.

The program is the problem prompt plus the completion (a function-body continuation),
or, when the completion defines the entry point itself (a full function, optionally in a
```python fence), the prompt's import lines plus the completion. The sandbox runs it with
the problem's `check(candidate)`; success is signalled by a per-call random nonce that
the runner prints only after `check` returns, and which travels on stdin, so a program
that exits early with status 0 or prints "passed" does not pass. Binary reward.

Not protected against: code that introspects the runner's own frames to read the nonce;
tests that are weaker than the docstring (the tests are the specification).
"""

from __future__ import annotations

import re
import secrets

from posttrain.registry import verifier
from posttrain.types import ExecLimits, Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

RUNNER = r'''
import sys
def _main():
    token = sys.stdin.readline().strip()
    entry = sys.argv[1]
    g = {"__name__": "__candidate__"}
    try:
        exec(compile(open("program.py").read(), "program.py", "exec"), g)
        exec(compile(open("test.py").read(), "test.py", "exec"), g)
        g["check"](g[entry])
    except BaseException as e:
        sys.stdout.write("\n@@FAIL@@ %s: %s\n" % (type(e).__name__, str(e)[:200]))
        sys.stdout.flush()
        return
    sys.stdout.write("\n@@PASS@@" + token + "\n")
    sys.stdout.flush()
_main()
'''

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def build_program(prompt: str, completion: str, entry_point: str) -> str:
    fenced = _FENCE.findall(completion)
    code = fenced[-1] if fenced else completion
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        imports = [ln for ln in prompt.splitlines() if re.match(r"^(import|from)\s", ln)]
        return "\n".join(imports) + "\n" + code
    return prompt + code


@verifier("humaneval")
class HumanEvalTests:
    def __init__(self, test: str, entry_point: str, prompt: str, wall_s: float = 10.0, memory_mb: int = 512) -> None:
        self.test, self.entry, self.prompt = test, entry_point, prompt
        self.limits = ExecLimits(wall_s=wall_s, cpu_s=wall_s, memory_mb=memory_mb, output_bytes=65536)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        completion = final_text(trajectory)
        if not completion.strip():
            return VerifyResult.fail("empty answer")
        program = build_program(self.prompt, completion, self.entry)
        try:
            compile(program, "program.py", "exec")
        except (SyntaxError, ValueError) as e:
            return VerifyResult.fail("syntax error", error=str(e)[:200])
        if ctx.sandbox is None:
            return VerifyResult.infra("no sandbox configured for humaneval")
        token = secrets.token_hex(16)
        files = {"program.py": program, "test.py": self.test, "runner.py": RUNNER}
        res = await ctx.sandbox.exec(["python3", "-I", "runner.py", self.entry], files=files, stdin=token + "\n", limits=self.limits)
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error: {res.error or res.stderr[:200]}")
        if f"@@PASS@@{token}" in res.stdout:
            return VerifyResult(1.0, True, {"wall_s": res.wall_s})
        fail = res.stdout[res.stdout.rfind("@@FAIL@@") :].strip()[:300] if "@@FAIL@@" in res.stdout else res.status
        return VerifyResult.fail("tests failed", error=fail, exec_status=res.status, stderr=res.stderr[-300:])
