"""A wall-time limit on pure-Python work that may never end, for task generators we did not write.

    with within(30.0):          # raises Overrun past 30 s, on the main thread
        made = generator[i]

reasoning-gym's number_sequence, on some seeds (seed 1 of examples/hundred_domains.yaml, level 3, item
12), composes squaring rules whose terms grow to millions of digits: one item never finished (26 min
of CPU before it was killed), so the whole run hung at task generation. A generator's failure to make an
item is already handled (the caller tries the next seed); this turns "never finishes" into such a failure.

How: SIGALRM via `setitimer`, whose handler raises between bytecodes. One big-integer operation is a
single bytecode, so the limit lands when the operation in flight ends (with terms that double in size,
within a few times the limit). A timer already running (pytest-timeout's, say) is put back with what
was left of it, and its handler too. Off the main thread, or where there is no SIGALRM (Windows), no
signal can be delivered there: the work runs unguarded, as before.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Iterator


class Overrun(Exception):
    """The guarded work ran past its limit."""


@contextlib.contextmanager
def within(limit_s: float) -> Iterator[None]:
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):  # noqa: ARG001
        raise Overrun(f"still running after {limit_s:g} s")

    before = signal.signal(signal.SIGALRM, _raise)
    t0 = time.monotonic()
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        if outer_delay > 0:  # someone else's timer: what was left of it (at least a moment, so it still fires)
            signal.setitimer(signal.ITIMER_REAL, max(outer_delay - (time.monotonic() - t0), 1e-3), outer_interval)
