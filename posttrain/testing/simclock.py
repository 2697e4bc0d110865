"""An asyncio event loop on virtual time, for simulating queues exactly and instantly.

    result = run_virtual(main())     # asyncio.sleep(3600) inside main() returns at once

When nothing is ready to run, the loop jumps its clock to the next timer instead of
sleeping. Code under test uses `loop.time()` (as asyncio's own timeouts do) and never
knows the difference, so the same `LongTailRunner` that serves real rollouts is what
the tests and the benchmark measure, deterministically and without wall-clock noise.

Does not: virtualise real I/O (sockets and subprocesses still take real time; a
blocking select waits for them) or `time.monotonic()` calls made by the code itself.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


class _JumpSelector(selectors.DefaultSelector):
    """Polls real file descriptors, and advances the virtual clock instead of waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if events or timeout is not None and timeout <= 0:
            return events
        if timeout is None:  # no timers at all: only real I/O (a thread-safe wakeup) can come
            return super().select(None)
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._jump = _JumpSelector()
        super().__init__(selector=self._jump)

    def time(self) -> float:
        return self._jump.now


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a fresh virtual-time loop and close it."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
