"""Cgroup cleanup that survives kill -9 of the process that made the cgroups.

    reaper.ensure_started()        # cgroups.Cgroup.create calls this before its first mkdir

A tiny helper process (`python -m posttrain.sandbox.reaper_main PID`) holds the read end of a
pipe whose only write end lives in process PID. When PID dies, however it dies, the
kernel closes that end, the helper's read returns EOF, and it removes every cgroup named
`posttrain-PID-*` (killing what is left inside first), then exits. The helper runs in its
own session, so a signal to the trainer's process group (Ctrl-C, `kill -9 -PGID`) does
not take it down before it has cleaned up.

Limits: a forked child that never execs inherits the write end, so cleanup waits until
it too has exited; a child that creates cgroups of its own starts its own reaper (one
per pid). If the reaper itself is killed -9 first, `cgroups.sweep_stale` at the next
start is the fallback.
"""

from __future__ import annotations

import os
import subprocess
import sys

_started_for: int | None = None  # pid whose reaper is running
_proc: subprocess.Popen | None = None
_write_fd: int | None = None


def ensure_started() -> int | None:
    """Start this process's reaper once (per pid); returns the reaper's pid, or None if it cannot start."""
    global _started_for, _proc, _write_fd
    if _started_for == os.getpid():
        return _proc.pid if _proc is not None else None
    _started_for = os.getpid()
    if _write_fd is not None:  # inherited through fork: that end belongs to our parent's reaper
        try:
            os.close(_write_fd)
        except OSError:
            pass
    r, w = os.pipe2(os.O_CLOEXEC)  # CLOEXEC: an exec'd child (bwrap, the zygote) never holds it
    try:
        _proc = subprocess.Popen(
            [sys.executable, "-m", "posttrain.sandbox.reaper_main", str(os.getpid())],
            stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env={**os.environ, "PYTHONPATH": _package_root()},
        )  # fmt: skip
    except OSError:
        _proc = None
        os.close(w)
        return None
    finally:
        os.close(r)
    _write_fd = w
    return _proc.pid


def _package_root() -> str:
    """The directory holding the `posttrain` package, so the helper imports this very copy."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    extra = os.environ.get("PYTHONPATH", "")
    return here + (os.pathsep + extra if extra else "")


def reaper_pid() -> int | None:
    return _proc.pid if _proc is not None and _started_for == os.getpid() else None
