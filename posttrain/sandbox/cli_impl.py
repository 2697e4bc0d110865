"""What `posttrain sandbox exec` does, as a library call (the CLI stays thin)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import IO, Sequence

from posttrain.errors import SandboxError
from posttrain.types import ExecLimits, thaw


def run_exec(cmd: Sequence[str], time_limit: float, memory_mb: int, image: str, mode: str, as_json: bool, stdin: IO) -> int:
    """Returns the process exit code to use: the program's, 124 on timeout, 125 on sandbox error."""
    from posttrain.sandbox.pool import SandboxPool

    if not cmd:
        raise SandboxError("no command given: use `posttrain sandbox exec -- CMD ARGS…`")
    data = b"" if stdin is None or stdin.isatty() else stdin.buffer.read()
    limits = ExecLimits(wall_s=time_limit, cpu_s=max(time_limit, 1.0), memory_mb=memory_mb)

    async def go():
        pool = SandboxPool(concurrency=1, mode="fresh" if mode == "auto" else mode)
        try:
            return await pool.exec(list(cmd), stdin=data, limits=limits, image=image)
        finally:
            await pool.close()

    res = asyncio.run(go())
    if as_json:
        print(json.dumps(thaw(res), indent=1))
    else:
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        if res.status not in ("ok", "nonzero_exit") or res.error:
            print(f"posttrain sandbox: {res.status}: {res.error}".rstrip(": "), file=sys.stderr)
    if res.exit_code is not None and res.status in ("ok", "nonzero_exit"):
        return res.exit_code
    return {"timeout": 124, "sandbox_error": 125}.get(res.status, 128 + (res.signal or 9))
