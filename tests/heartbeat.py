"""A line every minute of a long test run: how long it has run, the machine's memory, and the tests
running now (`[heartbeat 7:00] 6.1 GiB used, 0.0 GiB shared memory; running: a.py::t1, b.py::t2`).

On in CI (CI set) or with PYTEST_HEARTBEAT_S=seconds. Why: a run killed from outside (SIGKILL,
a memory watchdog) prints no summary, and its last line of dots says nothing about what ran; the
last heartbeat names the tests and the memory of that minute. Under xdist only (as `make test`
runs), in the controlling process, which learns of each test's start and end from the workers and
captures nothing; in a run without workers the capture of stderr would swallow the lines.
"""

from __future__ import annotations

import os
import sys
import threading
import time


def _interval() -> float:
    if os.environ.get("PYTEST_HEARTBEAT_S"):
        return float(os.environ["PYTEST_HEARTBEAT_S"])
    return 60.0 if os.environ.get("CI") else 0.0


def _memory() -> str:
    try:
        info = dict(line.split(":", 1) for line in open("/proc/meminfo"))
    except OSError:
        return "memory unknown"
    kb = {k: int(v.split()[0]) for k, v in info.items() if k in ("MemTotal", "MemAvailable", "Shmem")}
    gib = 1 << 20
    return f"{(kb['MemTotal'] - kb['MemAvailable']) / gib:.1f} GiB used, {kb['Shmem'] / gib:.1f} GiB shared memory"


class Heartbeat:
    def __init__(self, every_s: float) -> None:
        self.every_s, self.t0 = every_s, time.monotonic()
        self.running: dict[str, None] = {}  # test ids in start order
        self.stop = threading.Event()

    def pytest_runtest_logstart(self, nodeid, location):
        self.running[nodeid] = None

    def pytest_runtest_logreport(self, report):
        if report.when == "teardown":
            self.running.pop(report.nodeid, None)

    def pytest_sessionstart(self, session):
        threading.Thread(target=self._beat, daemon=True, name="heartbeat").start()

    def pytest_sessionfinish(self, session):
        self.stop.set()

    def _beat(self) -> None:
        while not self.stop.wait(self.every_s):
            m, s = divmod(int(time.monotonic() - self.t0), 60)
            now = ", ".join(list(self.running)[:4]) or "none"
            sys.stderr.write(f"\n[heartbeat {m}:{s:02d}] {_memory()}; running: {now}\n")
            sys.stderr.flush()


def pytest_configure(config):
    every = _interval()
    under_xdist = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if every > 0 and under_xdist:  # the controller of an xdist run
        config.pluginmanager.register(Heartbeat(every), "posttrain-heartbeat")
