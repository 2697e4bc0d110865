"""Global admission and least-loaded routing over per-node sandbox pools (no Ray here).

    router = Router([Slot("node-a", capacity=16), Slot("node-b", capacity=8)])
    slot = await router.admit()        # waits while every alive pool is full
    try: ... run on slot ...
    finally: router.release(slot)

Admission is global: a request waits here, on the driver, until some alive pool has a
free slot, so no node's own queue ever holds more than its capacity. Routing picks the
pool with the most free capacity (capacity - in flight); ties go to the pool that has
finished fewer executions, so equal nodes share work evenly. Kept free of Ray so the
policy is unit-tested on its own and its cost per decision can be measured.

Limits: the router trusts the capacities it is given; it does not probe a node's real
load (another tenant's work on the same node is invisible to it).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any


class NoCapacity(RuntimeError):
    """Every pool is dead: nothing can run. The message names the dead nodes."""


@dataclass
class Slot:
    name: str  # the node, as errors and metrics name it
    capacity: int
    handle: Any = None  # the Ray actor handle (opaque here)
    inflight: int = 0
    alive: bool = True
    done: int = 0
    failures: int = 0
    busy_s: float = 0.0  # summed wall seconds of executions finished here
    why_dead: str = ""
    t_first: float = field(default=0.0)

    @property
    def free(self) -> int:
        return self.capacity - self.inflight if self.alive else 0


class Router:
    def __init__(self, slots: list[Slot], queue_timeout_s: float = 600.0) -> None:
        if not slots:
            raise NoCapacity("no sandbox pools to route to (the cluster has no usable node)")
        self.slots = slots
        self.queue_timeout_s = queue_timeout_s
        self.waiting = 0  # queue depth: requests admitted by nobody yet
        self.max_waiting = 0
        self._cond: asyncio.Condition | None = None
        self._loop: object = None
        self.t0 = time.perf_counter()

    @property
    def cond(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()  # a Condition belongs to the loop that first waits on it
        if self._cond is None or self._loop is not loop:
            self._cond, self._loop = asyncio.Condition(), loop
        return self._cond

    def alive(self) -> list[Slot]:
        return [s for s in self.slots if s.alive]

    def pick(self) -> Slot | None:
        """The alive pool with the most free capacity, or None when all are full or dead."""
        best = None
        for s in self.slots:
            if s.free > 0 and (best is None or (s.free, -s.done) > (best.free, -best.done)):
                best = s
        return best

    def _check_alive(self) -> None:
        if not self.alive():
            dead = "; ".join(f"{s.name}: {s.why_dead}" for s in self.slots)
            raise NoCapacity(f"no sandbox capacity left: every pool is dead ({dead})")

    async def admit(self) -> Slot:
        """Reserve one slot on the least-loaded alive pool; waits while all are full."""
        self._check_alive()
        slot = self.pick()
        if slot is not None:
            slot.inflight += 1
            return slot
        cond, t0 = self.cond, time.perf_counter()
        self.waiting += 1
        self.max_waiting = max(self.max_waiting, self.waiting)
        try:
            async with cond:
                while (slot := self.pick()) is None:
                    self._check_alive()
                    left = self.queue_timeout_s - (time.perf_counter() - t0)
                    if left <= 0:
                        raise asyncio.TimeoutError(f"queued {self.queue_timeout_s}s for a sandbox slot")
                    try:
                        await asyncio.wait_for(cond.wait(), left)
                    except asyncio.TimeoutError:
                        continue
            slot.inflight += 1
            return slot
        finally:
            self.waiting -= 1

    def release(self, slot: Slot, wall_s: float = 0.0, ok: bool = True) -> None:
        slot.inflight -= 1
        if ok:
            slot.done += 1
            slot.busy_s += wall_s
        else:
            slot.failures += 1
        self._wake()

    def mark_dead(self, slot: Slot, why: str) -> None:
        if slot.alive:
            slot.alive, slot.why_dead = False, why
        self._wake()  # waiters must re-check: they may now have to fail with NoCapacity

    def _wake(self) -> None:
        if self._cond is None:
            return
        cond = self._cond

        async def notify() -> None:
            async with cond:
                cond.notify_all()

        try:
            asyncio.get_running_loop().create_task(notify())
        except RuntimeError:  # no running loop (called from a sync context): nobody can be waiting
            pass

    def metrics(self, prefix: str = "cluster/sandbox") -> dict[str, float]:
        el = max(1e-9, time.perf_counter() - self.t0)
        out: dict[str, float] = {f"{prefix}/queue_depth": self.waiting, f"{prefix}/max_queue_depth": self.max_waiting,
                                 f"{prefix}/pools_alive": len(self.alive())}
        for s in self.slots:
            p = f"{prefix}/{s.name}"
            out.update({f"{p}/executions": s.done, f"{p}/exec_per_s": s.done / el, f"{p}/inflight": s.inflight,
                        f"{p}/failures": s.failures, f"{p}/alive": float(s.alive), f"{p}/capacity": s.capacity})
        return out
