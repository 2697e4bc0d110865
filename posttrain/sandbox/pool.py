"""`SandboxPool`: the process-wide entry point for running untrusted code.

    pool = SandboxPool(concurrency=None)          # None -> os.cpu_count()
    res = await pool.exec(["python3", "check.py"], files={"check.py": src}, limits=ExecLimits(wall_s=5))
    pool.stats()                                  # slot deaths, starved timeouts, retries, last slot error
    await pool.close()

Modes: "pooled" runs every execution through a warm zygote per image (`zygote.py`): a
fork into fresh namespaces with a fresh tmpfs workspace, no bwrap or interpreter start-up.
"fresh" starts a new bwrap per execution (`fresh.py`). "auto" is pooled, falling back to
fresh if a warm slot cannot start on this machine.

Recycling: a slot is replaced after `max_uses` executions, or at once after any sign of
contamination (a process outliving its execution, a late or garbled answer). A slot
whose zygote died (on send, on receive, on timeout, on a garbled answer, or while idle)
is marked dead, discarded, counted in `stats()["slot_deaths"]`, and the execution is
retried once on a new slot: the program is not to blame for our machinery.

Admission control: at most min(`concurrency`, `max_running`) executions run at once;
`max_running` defaults to 2 x the usable cores (a program blocked on I/O or a child
leaves its core to another; more than that only slows every program down until honest
ones hit their wall limit). The rest queue, and a request that waits longer than
`queue_timeout_s` fails with `status="sandbox_error"` and an error naming the likely
cause (too few slots for the offered load, or executions that run to their wall limit).

Host overload is infrastructure: a pooled execution that hits its wall limit while the
host starved it of CPU (`overload.py`: it was runnable, got little, others had the CPU)
is queued again up to `starved_retries` times with its wall limit stretched to make up
for the wait (see overload.py); starved on every try it is `sandbox_error` naming the
starvation, never the program's `timeout`. A program that sleeps or stops itself is not
starved and keeps its `timeout`; one that had its limit's worth of CPU-available time on
a rerun and still ran out keeps it too. Both modes are measured.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Sequence

from posttrain.errors import SandboxError
from functools import lru_cache

import posttrain.sandbox.cgroups as cgroups
import posttrain.sandbox.images as images
import posttrain.sandbox.workspace as workspace
from posttrain.sandbox.overload import OWN_TIME_FRAC, CpuSample, Verdict, judge
from posttrain.sandbox.fresh import run_fresh
from posttrain.sandbox.result import is_wall_timeout
from posttrain.sandbox.runtime import workspace_root
from posttrain.sandbox.image_episodes import WarmSessions, exec_in_session
from posttrain.sandbox.session import ShellSession
from posttrain.sandbox.zygote import Zygote
from posttrain.sandbox.limits import validate
from posttrain.sandbox.protocol import FileMap
from posttrain.types import ExecLimits, ExecResult


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class SandboxPool:
    def __init__(
        self, concurrency: int | None = None, queue_timeout_s: float = 300.0, mode: str = "auto", max_uses: int = 1000,
        max_running: int | None = None, starved_retries: int = 2, warm_sessions: int = 2,
    ) -> None:  # fmt: skip
        if concurrency is not None and (not isinstance(concurrency, int) or concurrency <= 0):
            raise SandboxError(f"concurrency={concurrency!r} must be a positive integer or None")
        if max_running is not None and (not isinstance(max_running, int) or max_running <= 0):
            raise SandboxError(f"max_running={max_running!r} must be a positive integer or None")
        if mode not in ("auto", "fresh", "pooled"):
            raise SandboxError(f"mode={mode!r} must be 'auto', 'fresh' or 'pooled'")
        self.concurrency = concurrency or os.cpu_count() or 1
        self.queue_timeout_s = queue_timeout_s
        self.mode = mode
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: object = None
        self._closed = False
        self.executions = 0
        self.max_uses = max_uses
        self._idle: dict[str, list[Zygote]] = {}
        self._live = 0  # zygotes started and not yet closed
        self._sessions: set[ShellSession] = set()
        self.recycled = 0
        self.pooled_unavailable = ""  # why auto mode fell back to fresh, if it did
        self.max_running = max_running or 2 * usable_cores()
        self.starved_retries = starved_retries
        self._stats = {"slot_deaths": 0, "dead_slot_retries": 0, "start_failures": 0, "starved_timeouts": 0,
                       "starved_retries": 0}  # fmt: skip
        self.last_slot_error = ""
        self._ever_started = False  # a start failure after a success is a death, not "cannot run here"
        self.warm_sessions = WarmSessions(warm_sessions)  # started sessions per (rootfs image, limits)
        _sweep_once()

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()  # a semaphore is bound to the loop that first waits on it; the
        if self._sem is None or self._sem_loop is not loop:  # async RL producer runs on a loop of its own
            self._sem, self._sem_loop = asyncio.Semaphore(min(self.concurrency, self.max_running)), loop
        return self._sem

    def stats(self) -> dict[str, int | str]:
        """Counters of machinery failures since the pool started (what an infra-error report names)."""
        return {"executions": self.executions, "recycled": self.recycled, **self._stats,
                "last_slot_error": self.last_slot_error, "running_cap": min(self.concurrency, self.max_running),
                "live_slots": self._live}  # fmt: skip

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
        res, v = await self._admit_and_run(cmd, files, data, lim, img, read_files)
        tries = 1
        while v is not None and v.starved and tries <= self.starved_retries:  # the host's fault: run it again
            self._stats["starved_retries"] += 1
            stretched = dataclasses.replace(lim, wall_s=lim.wall_s * v.stretch())
            res, v = await self._admit_and_run(cmd, files, data, stretched, img, read_files)
            tries += 1
            if v is not None and v.own_time >= OWN_TIME_FRAC * lim.wall_s:  # it had its limit: its own timeout
                return dataclasses.replace(res, limits=lim, error=f"wall time limit of {lim.wall_s}s exceeded (rerun "
                                           f"with {stretched.wall_s:.2f}s of wall time: the host starved the first run)")
            if res.status != "timeout":
                return dataclasses.replace(res, limits=lim)
        if v is not None and v.starved:  # starved on every try: no verdict about the program is possible
            return ExecResult(status="sandbox_error", limits=lim, image_digest=img.digest,
                              error=f"{v.reason()}; timed out on {tries} tries, each starved of CPU by other work "
                              f"on this host (lower sandbox concurrency or the host's other load)")  # fmt: skip
        return res if tries == 1 else dataclasses.replace(res, limits=lim)

    async def _admit_and_run(self, cmd, files, data, lim, img, read_files) -> tuple[ExecResult, Verdict | None]:
        """One admitted run: (result, the host's CPU verdict on it when it hit its wall limit)."""
        t0 = time.perf_counter()
        sem = self._semaphore()
        try:
            if sem.locked():  # queue (with a timeout) only when every running place is taken
                await asyncio.wait_for(sem.acquire(), self.queue_timeout_s)
            else:
                await sem.acquire()  # returns at once
        except asyncio.TimeoutError:
            return ExecResult(
                status="sandbox_error", limits=lim, image_digest=img.digest,
                error=f"queued {time.perf_counter() - t0:.1f}s > queue_timeout_s={self.queue_timeout_s}: "
                f"all {min(self.concurrency, self.max_running)} running places busy; raise concurrency or lower the "
                f"offered load or wall limits",
            ), None  # fmt: skip
        try:
            self.executions += 1
            if img.rootfs is not None:  # a Debian-rootfs image: one step of a fresh (warm) session on its overlay
                return await self._exec_image(cmd, files, data, lim, img, read_files), None
            if self.mode == "fresh" or (self.mode == "auto" and self.pooled_unavailable):
                return await self._exec_fresh(cmd, files, data, lim, img, read_files)
            return await self._exec_pooled(cmd, files, data, lim, img, read_files)
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - machinery failure is data, not a crash
            return ExecResult(status="sandbox_error", limits=lim, image_digest=img.digest, error=f"{type(e).__name__}: {e}"), None
        finally:
            self._semaphore().release()

    async def _exec_pooled(self, cmd, files, data, lim, img, read_files) -> tuple[ExecResult, Verdict | None]:
        for attempt in (0, 1):  # a dead slot is ours to blame: one more try on a new slot
            try:
                z = await self._acquire(img)
            except Exception as e:  # noqa: BLE001
                self._stats["start_failures"] += 1
                if attempt == 0 and self._ever_started:  # slots started here before: this one was killed
                    self._count_death(f"a new slot died while starting: {type(e).__name__}: {e}")
                    continue
                if self.mode == "pooled":
                    raise SandboxError(f"cannot start a warm sandbox: {e}") from None
                self.pooled_unavailable = f"{type(e).__name__}: {e}"
                return await self._exec_fresh(cmd, files, data, lim, img, read_files)
            before = CpuSample.take(z.cg)
            try:
                res = await z.exec(cmd, files, data, lim, read_files)
            except SandboxError:  # the request is bad (a path outside the workspace): the slot is fine
                await self._release(z)
                raise
            except Exception as e:  # noqa: BLE001 - send failed or the answer was unreadable
                z.dead = True
                res = ExecResult(status="sandbox_error", limits=lim, image_digest=img.digest,
                                 error=f"warm slot failed: {type(e).__name__}: {e}")  # fmt: skip
            after = CpuSample.take(z.cg) if is_wall_timeout(res) else None
            zygote_died = z.dead and (res.status == "sandbox_error" or _exited(z))
            try:
                if zygote_died:
                    self._count_death(res.error or "zygote exited")
            finally:
                await self._release(z)
            if zygote_died and res.status == "sandbox_error" and attempt == 0:  # an answer that came is kept
                self._stats["dead_slot_retries"] += 1
                continue
            v = judge(before, after)
            if v is not None and v.starved:
                self._stats["starved_timeouts"] += 1
            return res, v
        raise AssertionError("unreachable")

    async def _exec_image(self, cmd, files, data, lim, img, read_files) -> ExecResult:
        s = await self.warm_sessions.take(img, lim, 1, lim.wall_s + 60.0)
        try:
            return await exec_in_session(s, cmd, files, data, lim, read_files)
        finally:
            await s.close()

    async def _exec_fresh(self, cmd, files, data, lim, img, read_files) -> tuple[ExecResult, Verdict | None]:
        res, v = await run_fresh(cmd, files, data, lim, img, read_files)
        if v is not None and v.starved:
            self._stats["starved_timeouts"] += 1
        return res, v

    def _count_death(self, error: str) -> None:
        self._stats["slot_deaths"] += 1
        self.last_slot_error = error[:300]

    async def _acquire(self, img: images.Image) -> Zygote:
        idle = self._idle.setdefault(img.digest, [])
        while idle:
            z = idle.pop()
            if not _exited(z):
                return z
            self._count_death("zygote exited while idle")  # killed between executions
            await self._discard(z)
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
        self._ever_started = True
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
        if img.rootfs is not None:
            await self.warm_sessions.fill(img, validate(None), n or self.warm_sessions.per_key)
            return
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
        img = images.resolve(image)
        if img.rootfs is not None:
            s = await self.warm_sessions.take(img, validate(limits), max_steps, time_budget_s)
        else:
            s = ShellSession(img, validate(limits), max_steps, time_budget_s)
            await s.start()
        self._sessions.add(s)
        return s

    async def close(self) -> None:
        self._closed = True
        for s in list(self._sessions):
            await s.close()
        self._sessions.clear()
        await self.warm_sessions.close()
        for zs in self._idle.values():
            while zs:
                await self._discard(zs.pop())


def _exited(z: Zygote) -> bool:
    return z.launched is not None and z.launched.proc.poll() is not None


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
