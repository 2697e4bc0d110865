"""Global admission and least-loaded routing over per-node sandbox pools (no Ray here).

    router = Router([Slot("node-a", capacity=16), Slot("node-b", capacity=8)])
    slot = await router.admit()        # waits while every alive pool is full
    try: ... run on slot ...
    finally: router.release(slot)

Admission is global: a request waits here, on the driver, until some alive pool has a
free slot, so no node's own queue ever holds more than its capacity plus `ahead` (the
executions sent ahead so a node never idles while a result travels back and the next
request travels out). Routing picks the pool with the most free capacity
(capacity + ahead - in flight); ties go to the pool that has finished fewer executions,
so equal nodes share work evenly. Kept free of Ray so the
policy is unit-tested on its own and its cost per decision can be measured.

Limits: the router trusts the capacities it is given; it does not probe a node's real
load (another tenant's work on the same node is invisible to it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any


class NoCapacity(RuntimeError):
    """Every pool is dead: nothing can run. The message names the dead nodes."""


@dataclass
class Slot:
    name: str  # the node, as errors and metrics name it
    capacity: int  # the pool's sandbox slots
    handle: Any = None  # the Ray actor handle (opaque here)
    ahead: int = 0  # executions admitted beyond capacity; they wait in the node's own pool queue
    inflight: int = 0
    alive: bool = True
    done: int = 0
    failures: int = 0
    busy_s: float = 0.0  # summed wall seconds of executions finished here
    why_dead: str = ""
    t_first: float = field(default=0.0)

    @property
    def free(self) -> int:
        return self.capacity + self.ahead - self.inflight if self.alive else 0


class Router:
    """Admission with a FIFO of waiters: a release hands its slot straight to the oldest waiter.

    Handing slots over (rather than waking every waiter to race for the lock) keeps arrival
    order, costs O(1) per release, and lets every waiter freed by one burst of releases run
    in the same event-loop turn, so the dispatcher can send them to a node in one call.
    """

    def __init__(self, slots: list[Slot], queue_timeout_s: float = 600.0) -> None:
        if not slots:
            raise NoCapacity("no sandbox pools to route to (the cluster has no usable node)")
        self.slots = slots
        self.queue_timeout_s = queue_timeout_s
        self.waiting = 0  # queue depth: requests admitted by nobody yet
        self.max_waiting = 0
        self._waiters: deque[asyncio.Future] = deque()
        self.t0 = time.perf_counter()

    def alive(self) -> list[Slot]:
        return [s for s in self.slots if s.alive]

    def pick(self) -> Slot | None:
        """The alive pool with the most free capacity, or None when all are full or dead."""
        best = None
        for s in self.slots:
            if s.free > 0 and (best is None or (s.free, -s.done) > (best.free, -best.done)):
                best = s
        return best

    def _no_capacity(self) -> NoCapacity:
        dead = "; ".join(f"{s.name}: {s.why_dead}" for s in self.slots)
        return NoCapacity(f"no sandbox capacity left: every pool is dead ({dead})")

    async def admit(self) -> Slot:
        """Reserve one slot on the least-loaded alive pool; waits (first come, first served) while all are full."""
        if not self.alive():
            raise self._no_capacity()
        if not self._waiters:  # nobody queued ahead of us
            slot = self.pick()
            if slot is not None:
                slot.inflight += 1
                return slot
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.waiting += 1
        self.max_waiting = max(self.max_waiting, self.waiting)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.queue_timeout_s)
        except asyncio.TimeoutError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                return fut.result()  # granted as the clock ran out: keep it
            raise asyncio.TimeoutError(f"queued {self.queue_timeout_s}s for a sandbox slot") from None
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(fut.result(), ok=False)  # granted to a caller that left: give it back
            raise
        finally:
            self.waiting -= 1
            if not fut.done():
                fut.cancel()  # _grant skips it

    def _grant(self) -> None:
        """Hand free slots to waiters in arrival order; with every pool dead, fail them all."""
        while self._waiters:
            fut = self._waiters[0]
            if fut.done():  # timed out or cancelled
                self._waiters.popleft()
                continue
            if not self.alive():
                self._waiters.popleft()
                fut.set_exception(self._no_capacity())
                continue
            slot = self.pick()
            if slot is None:
                return
            self._waiters.popleft()
            slot.inflight += 1
            fut.set_result(slot)

    def release(self, slot: Slot, wall_s: float = 0.0, ok: bool = True) -> None:
        slot.inflight -= 1
        if ok:
            slot.done += 1
            slot.busy_s += wall_s
        else:
            slot.failures += 1
        self._grant()

    def mark_dead(self, slot: Slot, why: str) -> None:
        if slot.alive:
            slot.alive, slot.why_dead = False, why
        self._grant()  # waiters must re-check: they may now have to fail with NoCapacity

    def metrics(self, prefix: str = "cluster/sandbox") -> dict[str, float]:
        el = max(1e-9, time.perf_counter() - self.t0)
        out: dict[str, float] = {f"{prefix}/queue_depth": self.waiting, f"{prefix}/max_queue_depth": self.max_waiting,
                                 f"{prefix}/pools_alive": len(self.alive())}
        for s in self.slots:
            p = f"{prefix}/{s.name}"
            out.update({f"{p}/executions": s.done, f"{p}/exec_per_s": s.done / el, f"{p}/inflight": s.inflight,
                        f"{p}/failures": s.failures, f"{p}/alive": float(s.alive), f"{p}/capacity": s.capacity})
        return out
