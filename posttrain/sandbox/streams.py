"""Non-blocking capture of a child's pipes and exit on the asyncio loop, with caps.

Uses a pidfd for the exit (no child-watcher thread per process) and `add_reader` for
the pipes. Each stream keeps at most `cap` bytes; going over the cap calls `on_overflow`
(which kills the sandbox) and sets the truncation flag.
"""

from __future__ import annotations

import asyncio
import os
from typing import Callable


class CappedReader:
    def __init__(self, fd: int, cap: int, on_overflow: Callable[[], None]) -> None:
        self.fd = fd
        self.cap = cap
        self.buf = bytearray()
        self.truncated = False
        self.total = 0
        self.done = asyncio.get_running_loop().create_future()
        self._on_overflow = on_overflow
        os.set_blocking(fd, False)
        asyncio.get_running_loop().add_reader(fd, self._ready)

    def _ready(self) -> None:
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return
        self.total += len(chunk)
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += chunk[:room]
        if self.total > self.cap and not self.truncated:
            self.truncated = True
            self._on_overflow()

    def close(self) -> None:
        if self.fd >= 0:
            asyncio.get_running_loop().remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        if not self.done.done():
            self.done.set_result(None)

    def text(self) -> str:
        return self.buf.decode("utf-8", errors="replace")


async def wait_pidfd(pid: int) -> None:
    """Resolve when process `pid` (our child) has exited; does not reap it."""
    loop = asyncio.get_running_loop()
    fd = os.pidfd_open(pid)
    fut = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def feed(fd: int, data: bytes) -> None:
    """Write stdin without blocking the loop; a program that never reads just gets EPIPE later."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    os.set_blocking(fd, False)
    try:
        while view:
            try:
                n = os.write(fd, view)
                view = view[n:]
            except BlockingIOError:
                fut = loop.create_future()
                loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
                try:
                    await fut
                finally:
                    loop.remove_writer(fd)
    except (BrokenPipeError, OSError):
        pass
    finally:
        os.close(fd)
