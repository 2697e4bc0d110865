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
_TAGGED = re.compile(r"```(?:python|py|python3)[ \t]*\n")


def _defines(code: str, entry_point: str) -> bool:
    return re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def code_candidates(completion: str, entry_point: str) -> list[str]:
    """Where the code may be in a model's reply, most likely first, as instruct models write it.

    Closed ```python blocks (those defining the entry point first, the last before earlier
    ones); an opened ```python block never closed (cut at the token budget): all after
    it; code closed by a fence it never opened (a reply that continues the prompt, then
    "```" and prose): all before it; all after a bare unclosed fence; the whole reply.
    Every candidate is the model's own text; `build_program` runs only one of them.
    """
    blocks = _FENCE.findall(completion)[::-1]
    out = [b for b in blocks if _defines(b, entry_point)] + [b for b in blocks if not _defines(b, entry_point)]
    if not blocks and "```" in completion:
        tagged = _TAGGED.search(completion)
        if tagged:
            out.append(completion[tagged.end():])
        cut = completion.index("```")
        out.append(completion[:cut])
        out.append(completion[cut:].partition("\n")[2])
    return [c for c in out if c.strip()] + [completion]


def _compiles(program: str) -> bool:
    try:
        compile(program, "program.py", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _program(prompt: str, code: str, entry_point: str) -> tuple[str, bool]:
    """(program, compiles): prompt + continuation, or the prompt's imports + a full definition.
    Code followed by prose ("This function uses ...") keeps its longest whole-line prefix
    that compiles."""
    if _defines(code, entry_point):
        head = "\n".join(ln for ln in prompt.splitlines() if re.match(r"^(import|from)\s", ln)) + "\n"
    else:
        head = prompt
    if _compiles(head + code):
        return head + code, True
    lines = code.splitlines(keepends=True)
    for end in range(len(lines) - 1, 0, -1):  # whole-line prefixes, longest first
        if lines[end - 1].strip() and _compiles(head + "".join(lines[:end])):
            return head + "".join(lines[:end]), True
    return head + code, False


def build_program(prompt: str, completion: str, entry_point: str) -> str:
    """The program to test: the first candidate (`code_candidates`) that compiles; if none
    does, the first one, so the verifier reports its syntax error."""
    first = None
    for code in code_candidates(completion, entry_point):  # stop at the first that compiles
        program, ok = _program(prompt, code, entry_point)
        if ok:
            return program
        first = first or program
    return first


def runner_argv() -> list[str]:
    """`python3 -c RUNNER`: runs in-process in a pooled zygote child (no interpreter start-up)."""
    return ["python3", "-c", RUNNER]


@verifier("humaneval", answer_format="code")
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
