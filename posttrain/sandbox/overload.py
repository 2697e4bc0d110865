"""Was a timed-out program starved by the host? Then the timeout is infrastructure, not a score.

    before = CpuSample.take(cg)
    ... the execution runs (and hits its wall limit) ...
    v = judge(before, CpuSample.take(cg))        # Verdict; v.starved -> the host's fault

A program is starved when, over its run (W seconds of wall time):
  1. it wanted a CPU and made no progress: its cgroup's CPU pressure 'full' total (the
     time its runnable processes were all waiting, none running) grew by >= a quarter of
     W (a fork-heavy program under 64-way contention shows 0.35-0.8 W; a sleeping or
     stopped one ~0; one whose own processes take turns on the CPUs ~0 on a quiet host);
  2. it got little: its cgroup's CPU time grew by < half of W;
  3. someone else had the CPU: the host's busy CPU time not spent by this cgroup grew by
     >= half of W.
Why a hostile program cannot fake it: a sleeping or SIGSTOPped process is not runnable,
so (1) fails; a program that makes its own contention (many spinning processes) keeps
one of them running, so 'full' stays ~0 and (1) fails, and it gets the CPU, failing (2),
or leaves the host idle, failing (3): every process it can make is inside its cgroup.
What it can do is time out *while the host really is overloaded by others*: then no
verdict about it is possible, and the pool reruns it with its wall limit stretched (at most MAX_STRETCH x)
so that its time *not* spent waiting for a CPU reaches the limit. A rerun that times out
after it had that much time is the program's own timeout (an infinite loop on a busy
host ends here); one starved on every try is infrastructure (`sandbox_error`).

Limits: needs per-cgroup pressure (cgroup v2, or the unified twin of a hybrid v1 host)
and /proc/stat; where either is missing `CpuSample.take` returns None and every
timeout stays the program's own, as before.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from posttrain.sandbox.cgroups import Cgroup

WAIT_FRAC = 0.25  # (1) no-progress-for-want-of-a-CPU share of the wall time
GOT_FRAC = 0.5  # (2) CPU time obtained, as a share of the wall time (one core = 1.0)
OTHERS_FRAC = 0.5  # (3) CPU time the rest of the host used, as a share of the wall time
MAX_STRETCH = 4.0  # a starved rerun gets at most this many times the wall limit
OWN_TIME_FRAC = 0.9  # a rerun whose non-waiting time reached this share of the limit timed out on its own
_TICK = os.sysconf("SC_CLK_TCK")
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (not idle, iowait, guest)


def host_busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat", "rb") as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != b"cpu":
        return None
    vals = [int(x) for x in first[1:]]
    return sum(vals[i] for i in _BUSY_FIELDS if i < len(vals)) / _TICK


@dataclass(frozen=True)
class CpuSample:
    t: float  # time.monotonic()
    got_s: float  # the cgroup's CPU time
    wait_s: float  # the cgroup's CPU pressure 'full' total (Cgroup.cpu_wait_seconds)
    host_busy_s: float

    @classmethod
    def take(cls, cg: Cgroup | None) -> "CpuSample | None":
        if cg is None:
            return None
        wait, got, host = cg.cpu_wait_seconds(), cg.cpu_seconds(), host_busy_seconds()
        if wait is None or got is None or host is None:
            return None
        return cls(time.monotonic(), got, wait, host)


@dataclass(frozen=True)
class Verdict:
    """What one timed-out run got from the host (seconds over its W seconds of wall time)."""

    wall: float
    wait: float  # runnable but waiting for a CPU
    got: float  # CPU time it ran
    others: float  # CPU time the rest of the host ran

    @property
    def starved(self) -> bool:
        return (self.wait >= WAIT_FRAC * self.wall and self.got < GOT_FRAC * self.wall
                and self.others >= OTHERS_FRAC * self.wall)  # fmt: skip

    @property
    def own_time(self) -> float:
        """Wall time not spent waiting for a CPU: what the program had to make progress in."""
        return max(0.0, self.wall - self.wait)

    def stretch(self) -> float:
        """Wall-limit factor for a rerun that gives the program its limit in CPU-available time."""
        return min(MAX_STRETCH, max(1.0, 1.1 * self.wall / max(self.own_time, self.wall / MAX_STRETCH)))

    def reason(self) -> str:
        return (f"host overloaded: over {self.wall:.2f}s the program waited {self.wait:.2f}s for a CPU and ran "
                f"{self.got:.2f}s while the rest of the host ran {self.others:.2f}s")


def judge(before: CpuSample | None, after: CpuSample | None) -> Verdict | None:
    """The verdict on one run between two samples; None where it cannot be measured."""
    if before is None or after is None or after.t <= before.t:
        return None
    got = after.got_s - before.got_s
    return Verdict(after.t - before.t, after.wait_s - before.wait_s, got, (after.host_busy_s - before.host_busy_s) - got)


def starved(before: CpuSample | None, after: CpuSample | None) -> str | None:
    """A one-line reason when the run was starved by the host; None when it was not (or unknown)."""
    v = judge(before, after)
    return v.reason() if v is not None and v.starved else None
