"""`humaneval`: run a HumanEval problem's unit tests on the model's code, in the sandbox.

The program is the problem prompt plus the completion (a function-body continuation),
or, when the completion defines the entry point itself (a full function, optionally in a
```python fence), the prompt's import lines plus the completion. Binary reward.

Isolation (one sandbox execution, two processes; see `humaneval_runner.py`):

    host --stdin: {token, prompt, test, program, entry}--> P (checker, non-dumpable)
    P --fork, before reading stdin--> C (candidate): stdio = /dev/null, other fds closed
    P: exec(trusted prompt + test); check(proxy); proxy(*args) -> pipe -> C -> f(*args)
    C --pipe: tagged plain data (`plain_data`) or an exception's type name--> P
    P --stdout: "@@PASS@@<token>" only if check() returned--> host

So the candidate never shares an interpreter with the tests: it cannot patch `compile`,
`assert`'s operands, the test file (there is none) or the runner's frames (the token
never was in its memory, and P is non-dumpable: no /proc/P/mem, /proc/P/fd). What comes
back is rebuilt from builtins, so an object whose `__eq__` always succeeds, or a
subclass of int with its own `__eq__`, is not a value at all and fails the test.
Killing or stopping P only loses (no marker, or a timeout).

Limits: arguments reach the candidate as copies, so a test that relies on the candidate
mutating its argument in place cannot see it (no HumanEval test does); arguments and
results must be plain data (8 MiB, 64 levels of nesting); an exception reaches the test
as the builtin type of that name (others as RuntimeError), without its message. Not
protected against tests weaker than the docstring (the tests are the specification).
"""

from __future__ import annotations

import json
import re
import secrets

from posttrain.registry import verifier
from posttrain.types import ExecLimits, Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.humaneval_runner import RUNNER
from posttrain.verifiers.math_answer import final_text

_FENCE = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)


def build_program(prompt: str, completion: str, entry_point: str) -> str:
    fenced = _FENCE.findall(completion)
    code = fenced[-1] if fenced else completion
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        imports = [ln for ln in prompt.splitlines() if re.match(r"^(import|from)\s", ln)]
        return "\n".join(imports) + "\n" + code
    return prompt + code


def runner_argv() -> list[str]:
    """`python3 -c RUNNER`: runs in-process in a pooled zygote child (no interpreter start-up)."""
    return ["python3", "-c", RUNNER]


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
        job = {"token": token, "prompt": self.prompt, "test": self.test, "program": program, "entry": self.entry}
        res = await ctx.sandbox.exec(runner_argv(), stdin=json.dumps(job), limits=self.limits)
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error: {res.error or res.stderr[:200]}")
        if res.stdout.startswith("\n@@INFRA@@"):  # only P writes stdout, and this before C exists
            return VerifyResult.infra(res.stdout.strip()[:200])
        if res.status == "ok" and f"\n@@PASS@@{token}\n" in res.stdout:
            return VerifyResult(1.0, True, {"wall_s": res.wall_s})
        fail = res.stdout[res.stdout.rfind("@@FAIL@@") :].strip()[:300] if "@@FAIL@@" in res.stdout else res.status
        return VerifyResult.fail("tests failed", error=fail, exec_status=res.status, stderr=res.stderr[-300:])
