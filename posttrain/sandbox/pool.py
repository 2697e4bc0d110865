"""`SandboxPool`: the process-wide entry point for running untrusted code.

    pool = SandboxPool(concurrency=None)          # None -> os.cpu_count()
    res = await pool.exec(["python3", "check.py"], files={"check.py": src}, limits=ExecLimits(wall_s=5))
    await pool.close()

Modes: "pooled" runs every execution through a warm zygote per image (`zygote.py`): a
fork into fresh namespaces with a fresh tmpfs workspace, no bwrap or interpreter start-up.
"fresh" starts a new bwrap per execution (`fresh.py`). "auto" is pooled, falling back to
fresh if a warm slot cannot start on this machine.

Recycling: a slot is replaced after `max_uses` executions, or at once after any sign of
contamination (a process outliving its execution, a late or garbled answer).

Admission control: at most `concurrency` executions run at once; the rest queue, and a
request that waits longer than `queue_timeout_s` fails with `status="sandbox_error"` and
an error naming the likely cause (too few slots for the offered load, or executions
that run to their wall limit).
"""

from __future__ import annotations

import asyncio
import os
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Sequence

from posttrain.errors import SandboxError
from functools import lru_cache

from posttrain.sandbox import cgroups, images, workspace
from posttrain.sandbox.runtime import workspace_root
from posttrain.sandbox.fresh import run_fresh
from posttrain.sandbox.session import ShellSession
from posttrain.sandbox.zygote import Zygote
from posttrain.sandbox.limits import validate
from posttrain.sandbox.protocol import FileMap
from posttrain.types import ExecLimits, ExecResult


class SandboxPool:
    def __init__(
        self, concurrency: int | None = None, queue_timeout_s: float = 300.0, mode: str = "auto", max_uses: int = 1000
    ) -> None:
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
        self.max_uses = max_uses
        self._idle: dict[str, list[Zygote]] = {}
        self._live = 0  # zygotes started and not yet closed
        self._sessions: set[ShellSession] = set()
        self.recycled = 0
        self.pooled_unavailable = ""  # why auto mode fell back to fresh, if it did
        _sweep_once()

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
            if self.mode == "fresh" or (self.mode == "auto" and self.pooled_unavailable):
                return await run_fresh(cmd, files, data, lim, img, read_files)
            return await self._exec_pooled(cmd, files, data, lim, img, read_files)
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - machinery failure is data, not a crash
            return ExecResult(status="sandbox_error", limits=lim, image_digest=img.digest, error=f"{type(e).__name__}: {e}")
        finally:
            self._semaphore().release()

    async def _exec_pooled(self, cmd, files, data, lim, img, read_files) -> ExecResult:
        try:
            z = await self._acquire(img)
        except Exception as e:  # noqa: BLE001
            if self.mode == "pooled":
                raise SandboxError(f"cannot start a warm sandbox: {e}") from None
            self.pooled_unavailable = f"{type(e).__name__}: {e}"
            return await run_fresh(cmd, files, data, lim, img, read_files)
        try:
            return await z.exec(cmd, files, data, lim, read_files)
        finally:
            await self._release(z)

    async def _acquire(self, img: images.Image) -> Zygote:
        idle = self._idle.setdefault(img.digest, [])
        if idle:
            return idle.pop()
        if self._live >= self.concurrency:  # evict an idle slot of another image
            for other in self._idle.values():
                if other:
                    await self._discard(other.pop(0))
                    break
        z = Zygote(img)
        self._live += 1
        try:
            await z.start()
        except BaseException:
            await self._discard(z)
            raise
        return z

    async def _release(self, z: Zygote) -> None:
        if z.dead or z.uses >= self.max_uses or self._closed:
            self.recycled += 1
            await self._discard(z)
        else:
            self._idle.setdefault(z.image.digest, []).append(z)

    async def _discard(self, z: Zygote) -> None:
        self._live -= 1
        await z.close()

    async def warm(self, image: str = "host", n: int | None = None) -> None:
        """Start warm slots ahead of the first request (each start is ~100 ms)."""
        img = images.resolve(image)
        zs = [await self._acquire(img) for _ in range(n or self.concurrency)]
        for z in zs:
            await self._release(z)

    @asynccontextmanager
    async def session(
        self, image: str = "host", limits: ExecLimits | None = None, max_steps: int = 1000, time_budget_s: float = 3600.0
    ) -> AsyncIterator[ShellSession]:
        """`async with pool.session(image) as s:` a persistent shell; see `session.py`."""
        s = await self.open_session(image, limits, max_steps, time_budget_s)
        try:
            yield s
        finally:
            await s.close()
            self._sessions.discard(s)

    async def open_session(
        self, image: str = "host", limits: ExecLimits | None = None, max_steps: int = 1000, time_budget_s: float = 3600.0
    ) -> ShellSession:
        """Like `session()` without the context manager: the caller must `await s.close()`."""
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        s = ShellSession(images.resolve(image), validate(limits), max_steps, time_budget_s)
        await s.start()
        self._sessions.add(s)
        return s

    async def close(self) -> None:
        self._closed = True
        for s in list(self._sessions):
            await s.close()
        self._sessions.clear()
        for zs in self._idle.values():
            while zs:
                await self._discard(zs.pop())


@lru_cache(maxsize=1)
def _sweep_once() -> None:
    """Leftovers of a crashed earlier process (cgroups, workspaces) go before we add ours."""
    cgroups.sweep_stale()
    workspace.sweep_stale(workspace_root())


_DEFAULT: SandboxPool | None = None


def default_sandbox() -> SandboxPool:
    """The process-wide pool (created on first use)."""
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT._closed:
        _DEFAULT = SandboxPool()
    return _DEFAULT
