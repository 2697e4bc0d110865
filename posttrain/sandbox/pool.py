"""`SandboxPool`: the process-wide entry point for running untrusted code.

    pool = SandboxPool(concurrency=None)          # None -> os.cpu_count()
    res = await pool.exec(["python3", "check.py"], files={"check.py": src}, limits=ExecLimits(wall_s=5))
    await pool.close()

Admission control: at most `concurrency` executions run at once; the rest queue, and a
request that waits longer than `queue_timeout_s` fails with `status="sandbox_error"` and
an error naming the likely cause (too few slots for the offered load, or executions
that run to their wall limit).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Sequence

from posttrain.errors import SandboxError
from posttrain.sandbox import images
from posttrain.sandbox.fresh import run_fresh
from posttrain.sandbox.limits import validate
from posttrain.sandbox.protocol import FileMap
from posttrain.types import ExecLimits, ExecResult


class SandboxPool:
    def __init__(self, concurrency: int | None = None, queue_timeout_s: float = 300.0, mode: str = "auto") -> None:
        if concurrency is not None and (not isinstance(concurrency, int) or concurrency <= 0):
            raise SandboxError(f"concurrency={concurrency!r} must be a positive integer or None")
        if mode not in ("auto", "fresh", "pooled"):
            raise SandboxError(f"mode={mode!r} must be 'auto', 'fresh' or 'pooled'")
        self.concurrency = concurrency or os.cpu_count() or 1
        self.queue_timeout_s = queue_timeout_s
        self.mode = mode
        self._sem: asyncio.Semaphore | None = None
        self._closed = False
        self.executions = 0

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        return self._sem

    async def exec(
        self,
        cmd: Sequence[str],
        files: FileMap | None = None,
        stdin: str | bytes = b"",
        limits: ExecLimits | None = None,
        image: str = "host",
        read_files: Sequence[str] = (),
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        if isinstance(cmd, str) or not cmd or not all(isinstance(c, str) and c for c in cmd):
            raise SandboxError(f"bad command {cmd!r}: expected a non-empty list of non-empty strings")
        lim = validate(limits)
        img = images.resolve(image)
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(self._semaphore().acquire(), self.queue_timeout_s)
        except asyncio.TimeoutError:
            return ExecResult(
                status="sandbox_error", limits=lim, image_digest=img.digest,
                error=f"queued {time.perf_counter() - t0:.1f}s > queue_timeout_s={self.queue_timeout_s}: "
                f"all {self.concurrency} slots busy; raise concurrency or lower the offered load or wall limits",
            )  # fmt: skip
        try:
            self.executions += 1
            return await run_fresh(cmd, files, data, lim, img, read_files)
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - machinery failure is data, not a crash
            return ExecResult(status="sandbox_error", limits=lim, image_digest=img.digest, error=f"{type(e).__name__}: {e}")
        finally:
            self._semaphore().release()

    async def close(self) -> None:
        self._closed = True


_DEFAULT: SandboxPool | None = None


def default_sandbox() -> SandboxPool:
    """The process-wide pool (created on first use)."""
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT._closed:
        _DEFAULT = SandboxPool()
    return _DEFAULT
