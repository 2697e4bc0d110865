"""Episodes in Debian-rootfs images: warm sessions, and one-shot executions built on them.

Every episode is its own bwrap on a throwaway overlay of the image (`rootfs_argv`):
writes go to a tmpfs that dies with it, its workspace is a fresh copy of the image's
WORKDIR, and its processes, /tmp, /dev/shm and network namespace end with it. So a
start stays fast, `WarmSessions` keeps a few sessions per (image, limits) already
started -- bwrap up, bash waiting, nothing run -- and starts a replacement in the
background whenever one is taken. A warm session has never run a step, so taking one
is the same as starting one, minus the wait.

A one-shot `exec` in an image is one step of a fresh (warm) session: the command runs
with stdin from a host-written file in the control directory, the session is closed
after it, and `read_files` are read host-side without following symlinks.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from typing import Mapping, Sequence

from posttrain.errors import SandboxError
from posttrain.sandbox.images import Image
from posttrain.sandbox.session import CTL_INSIDE, ShellSession
from posttrain.types import ExecLimits, ExecResult


class WarmSessions:
    def __init__(self, per_key: int = 2, max_idle: int = 16) -> None:
        self.per_key, self.max_idle = per_key, max_idle  # an eval over many images keeps at most max_idle warm
        self._idle: dict[tuple, list[ShellSession]] = {}
        self._tasks: set[asyncio.Task] = set()
        self.hits = self.misses = 0
        self.closed = False

    async def take(self, img: Image, limits: ExecLimits, max_steps: int, time_budget_s: float) -> ShellSession:
        key = _key(img, limits)
        idle = self._idle.setdefault(key, [])
        s = None
        while idle and s is None:
            cand = idle.pop()
            if cand.launched.proc.poll() is None:
                s = cand
            else:
                await cand.close()
        if s is None:
            self.misses += 1
            s = await ShellSession(img, limits, max_steps, time_budget_s).start()
        else:
            self.hits += 1  # memory, pids, wall and output limits apply per step: the request's own
            s.limits, s.max_steps, s.time_budget_s, s.started = limits, max_steps, time_budget_s, time.monotonic()
        self._refill(img, limits)
        return s

    def _refill(self, img: Image, limits: ExecLimits) -> None:
        if self.closed or self.per_key <= 0:
            return
        key = _key(img, limits)
        pending = sum(1 for t in self._tasks if getattr(t, "pt_key", None) == key)
        for _ in range(self.per_key - len(self._idle.get(key, [])) - pending):
            t = asyncio.get_running_loop().create_task(self._start_one(img, limits))
            t.pt_key = key  # type: ignore[attr-defined]
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _start_one(self, img: Image, limits: ExecLimits) -> None:
        try:
            s = await asyncio.to_thread(ShellSession(img, limits).start_blocking)
        except Exception:  # noqa: BLE001 - a failed warm start is retried by the next take, which starts its own
            return
        if self.closed:
            await s.close()
            return
        mine = _key(img, limits)
        self._idle.setdefault(mine, []).append(s)
        while self.idle_count() > self.max_idle:  # drop one of the image with the most idle sessions (not this one)
            key = max((k for k in self._idle if self._idle[k] and k != mine), key=lambda k: len(self._idle[k]), default=mine)
            await self._idle[key].pop(0).close()

    async def fill(self, img: Image, limits: ExecLimits, n: int) -> None:
        await asyncio.gather(*(self._start_one(img, limits) for _ in range(max(0, n - len(self._idle.get(_key(img, limits), []))))))

    def idle_count(self) -> int:
        return sum(len(v) for v in self._idle.values())

    async def close(self) -> None:
        self.closed = True
        for t in list(self._tasks):
            await asyncio.gather(t, return_exceptions=True)
        for ss in self._idle.values():
            while ss:
                await ss.pop().close()


def _key(img: Image, limits: ExecLimits) -> tuple:
    """Which warm sessions can serve `limits`: with cgroups, memory and pids are set per step, so only the
    rlimits fixed when bash starts (file size, open files) must match; without cgroups, all of them."""
    from posttrain.sandbox.cgroups import kind

    return (img.digest, limits.fsize_mb, limits.nofile) if kind() else (img.digest, limits)


async def exec_in_session(
    s: ShellSession, cmd: Sequence[str], files: Mapping[str, "str | bytes"] | None, stdin: bytes,
    limits: ExecLimits, read_files: Sequence[str],
) -> ExecResult:  # fmt: skip
    """One command as the only step of `s` (which the caller closes)."""
    for path, data in (files or {}).items():
        await s.write_file(path, data)
    await s.snapshot()
    s.ctl.write("stdin", stdin)
    res = await s.run(f"{shlex.join(cmd)} <{CTL_INSIDE}/stdin", timeout=limits.wall_s)
    if res.status == "nonzero_exit" and res.exit_code == 127 and "command not found" in res.stderr:
        res = _replace(res, error=f"command {cmd[0]!r} not found in the image")
    got: dict[str, str] = {}
    if not s.closed_reason:
        for rel in read_files:
            try:
                got[rel] = (await s.read_file(rel)).decode("utf-8", errors="replace")
            except SandboxError:
                pass  # absent or not a regular file: the caller sees it missing
    return _replace(res, files=got)


def _replace(res: ExecResult, **kw) -> ExecResult:
    import dataclasses

    return dataclasses.replace(res, **kw)
