"""A monotonic clock that leaves out the time this process was stopped (Ctrl-Z, SIGSTOP).

    now = awake_now()    # seconds; advances at most TICK_S + GRACE_S while the process is stopped

Why: a follower gives up on rank 0 after `trainer.timeout_s` without a heartbeat (group.py). A job
suspended with Ctrl-Z (launch.py stops every rank) for longer than that would find every peer
"silent" the moment it is continued, before the first beat after `fg` could arrive, and end.
Linux has no clock that stops with a process (CLOCK_MONOTONIC runs on; a CPU-time clock also
stands still while a rank merely waits for its peers), so this one is measured: a thread that
only sleeps ticks every TICK_S, and a gap between two ticks beyond TICK_S + GRACE_S is time this
process did not run. The open gap counts too, so a reader that runs before the ticker after
SIGCONT already sees the pause left out.

Limits: a process starved of CPU or of the GIL for more than GRACE_S also counts as paused, so a
peer's death is noticed that much later (never missed). Collective deadlines are not measured
here: gloo and NCCL time a collective on CLOCK_MONOTONIC (see job_control.py).
"""

from __future__ import annotations

import os
import threading
import time

TICK_S = 0.25
GRACE_S = 1.0  # lateness of a tick that is still "running" (a busy machine, a long GIL hold)


class AwakeClock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paused = 0.0  # the closed gaps' time not run
        self._tick = time.monotonic()
        # Daemon, and only sleeps: nothing to unwind at exit (unlike a thread inside a TCPStore call).
        threading.Thread(target=self._run, name="posttrain-awake-clock", daemon=True).start()

    def _gap(self, now: float) -> float:
        """The open gap's time not run (0 while the ticker is on time)."""
        return max(0.0, now - self._tick - TICK_S - GRACE_S)

    def _run(self) -> None:
        while True:
            time.sleep(TICK_S)
            with self._lock:
                now = time.monotonic()
                self._paused += self._gap(now)  # close the gap: continuous with what now() returned
                self._tick = now

    def now(self) -> float:
        with self._lock:
            t = time.monotonic()
            return t - self._paused - self._gap(t)


_CLOCK: AwakeClock | None = None
_PID = 0
_START = threading.Lock()


def awake_now() -> float:
    """This process's awake time. One ticker per process, started on first use and again in a
    forked child (which inherits the clock but not its thread: it would stand still for good)."""
    global _CLOCK, _PID
    with _START:  # the heartbeat thread and the main thread must read one clock
        if _CLOCK is None or _PID != os.getpid():
            _CLOCK, _PID = AwakeClock(), os.getpid()
        clock = _CLOCK
    return clock.now()
