"""Final-state verifiers for shell tasks: `terminal_checks` and `harbor_test`.

Both run only after the agent has finished, and never inside the agent's shell: they
read the session's final workspace (every file, via `snapshot` + `read_file`) and run
the check in a *fresh* sandbox holding those files plus the check script, which the
agent never saw and could not edit. Shell state the agent left behind (functions,
aliases, background jobs, a doctored PATH) cannot reach the check.

`terminal_checks`: the task's check script defines named checks with
`check NAME CMD...`; each prints a line tagged with a nonce read from stdin (so the
program under test cannot print fake PASS lines). score = passed / len(names).

`harbor_test`: a Harbor/Terminal-Bench `tests/test.sh`, with `/tests`, `/app`,
`/logs/verifier` rewritten to workspace paths; the reward is the float in
`logs/verifier/reward.txt` (clipped to [0, 1]).

Not protected against: checks that depend on processes or kernel state (only files
carry over); a program under test that reads the check shell's memory via /proc.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, Sequence

from posttrain.registry import verifier
from posttrain.types import ExecLimits, Task, Trajectory, VerifyResult
from posttrain.tasks.harbor import rewrite_harbor_paths
from posttrain.verifiers.base import VerifyContext

PRELUDE = r'''read -r PT_TOKEN
exec 0</dev/null
check() { n="$1"; shift; if ( "$@" ) >/dev/null 2>&1; then echo "@@CHECK@@$PT_TOKEN PASS $n"; else echo "@@CHECK@@$PT_TOKEN FAIL $n"; fi; }
'''
WORKDIR = "/work"  # the sandbox's workspace directory (cwd of every exec)


async def workspace_files(session: Any, max_total: int = 16 << 20) -> dict[str, bytes]:
    """Every file in the session's workspace after the episode (bounded in total size)."""
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(await session.snapshot()):
        data = await session.read_file(path)
        total += len(data)
        if total > max_total:
            raise ValueError(f"workspace over {max_total} bytes")
        files[path] = data
    return files


def _check_limits(wall_s: float) -> ExecLimits:
    return ExecLimits(wall_s=wall_s, cpu_s=wall_s, memory_mb=512, output_bytes=1 << 18)


@verifier("terminal_checks", answer_format="line")
class TerminalChecks:
    def __init__(self, script: str, names: Sequence[str], wall_s: float = 20.0) -> None:
        self.script, self.names, self.wall_s = script, tuple(names), wall_s

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        if ctx.session is None or ctx.sandbox is None:
            return VerifyResult.infra("terminal_checks needs the episode's session and a sandbox")
        try:
            files = await workspace_files(ctx.session)
        except Exception as e:  # noqa: BLE001  the session died: no judgement possible
            return VerifyResult.infra(f"could not read the final workspace: {type(e).__name__}: {e}")
        token = secrets.token_hex(12)
        check_name = f".check_{secrets.token_hex(6)}.sh"
        files[check_name] = (PRELUDE + self.script).encode()
        res = await ctx.sandbox.exec(["bash", check_name], files=files, stdin=token + "\n", limits=_check_limits(self.wall_s))
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error: {res.error}")
        passed = set(re.findall(rf"^@@CHECK@@{token} PASS (\S+)$", res.stdout, re.MULTILINE))
        ok = [n for n in self.names if n in passed]
        failed = [n for n in self.names if n not in passed]
        score = len(ok) / len(self.names) if self.names else 0.0
        return VerifyResult(score, not failed, {"passed": ok, "failed": failed, "check_status": res.status})


@verifier("harbor_test", answer_format="line")
class HarborTest:
    def __init__(self, tests: dict[str, str], wall_s: float = 60.0) -> None:
        self.tests = {f"tests/{k}": rewrite_harbor_paths(v) if k.endswith(".sh") else v for k, v in dict(tests).items()}
        self.wall_s = wall_s

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        if ctx.session is None or ctx.sandbox is None:
            return VerifyResult.infra("harbor_test needs the episode's session and a sandbox")
        try:
            files = await workspace_files(ctx.session)
        except Exception as e:  # noqa: BLE001
            return VerifyResult.infra(f"could not read the final workspace: {type(e).__name__}: {e}")
        files = {k: v for k, v in files.items() if not k.startswith(("tests/", "logs/"))}  # the agent's copies never count
        files.update({k: v.encode() for k, v in self.tests.items()})
        cmd = ["bash", "-c", "mkdir -p logs/verifier && bash tests/test.sh"]
        res = await ctx.sandbox.exec(cmd, files=files, limits=_check_limits(self.wall_s), read_files=["logs/verifier/reward.txt"])
        if res.status == "sandbox_error":
            return VerifyResult.infra(f"sandbox error: {res.error}")
        raw = res.files.get("logs/verifier/reward.txt")
        if raw is None:
            return VerifyResult.fail("test.sh wrote no logs/verifier/reward.txt", exec_status=res.status, stderr=res.stderr[-300:])
        try:
            reward = float(raw.strip())
        except ValueError:
            return VerifyResult.fail(f"reward.txt is not a number: {raw[:40]!r}")
        reward = min(1.0, max(0.0, reward))
        return VerifyResult(reward, reward >= 1.0, {"exec_status": res.status})
