"""Ctrl-Z, `fg` and `bg` for the local launcher's ranks (launch.run_ranks).

    with JobControl(procs) as jc:   # around the launcher's watch loop; procs may still grow
        ...
        jc.pause_note(timeout_s)    # appended to the line that names a rank failing right after `fg`

The ranks run in process groups of their own, so that a terminal's Ctrl-C reaches the launcher
alone (launch.py). That also keeps Ctrl-Z (SIGTSTP, sent to the terminal's foreground group) from
them: the launcher would stop while the ranks trained on, unseen, and their collectives timed out
against nothing. So on SIGTSTP the launcher stops each rank's whole group (the rank and what it
started in its group), then stops itself the standard way (default action restored, SIGTSTP raised on
itself); once continued (SIGCONT: the shell's `fg` or `bg`) it continues them.

SIGSTOP, not SIGTSTP, for the ranks: nothing in a rank handles SIGTSTP, and SIGSTOP cannot be
ignored. Where the kernel drops the launcher's own stop (its process group is orphaned: no shell
could continue it), the launcher continues the ranks at once, so the job never stays half-stopped.

Heartbeats outlive a pause (awake_clock.py). A collective does not: gloo and NCCL time it on
CLOCK_MONOTONIC, so a collective in flight when the job was stopped fails once it is continued
if the pause outlasted `trainer.timeout_s`; `pause_note` lets the launcher say so.

A launcher killed while suspended (`kill -9 %1`) leaves no stopped ranks: their parent-death
SIGTERM waits for a SIGCONT, which the kernel sends (with SIGHUP) to a process group orphaned with
stopped members. The kernel counts a process as stopped only once every one of its threads has
stopped, and it looks once, as the launcher exits: so the launcher stops itself only after each
rank's threads have all stopped (`_await_stopped`); else a rank whose gloo thread was still running
when the launcher was killed stayed stopped for good, its SIGTERM pending.

Not here: torchrun starts each rank in a session of its own (Ctrl-Z stops torchrun alone); with
`trainer.launcher=ray` the command's process is rank 0 and Ctrl-Z stops it alone.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Sequence


NOTE_WITHIN_S = 60.0  # a collective that timed out during the pause fails within seconds of `fg`
STOP_WITHIN_S = 5.0  # a thread in an uninterruptible call (disk I/O) stops when it returns; not waited for longer


def _threads_stopped(pid: int) -> bool:
    """Every thread of `pid` stopped (T), or the process ended (Z, X, gone): only then does the kernel
    count it a stopped job. /proc/PID/task/TID/stat's state field follows the name's closing ')'."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone (or no /proc: nothing to wait on)
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended while we looked
        if state not in "TtZX":
            return False
    return True


def _await_stopped(pids: Sequence[int], within_s: float = STOP_WITHIN_S) -> None:
    """Wait (at most `within_s`) until every thread of each of `pids` has stopped."""
    deadline = time.monotonic() + within_s
    while not all(_threads_stopped(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.005)


class JobControl:
    def __init__(self, procs: Sequence[Any]) -> None:
        self.procs = procs  # subprocess.Popen, each the leader of its own process group
        self.paused_s, self.resumed_at = 0.0, 0.0  # the last suspension: its length, its end (monotonic)
        self._before: dict[int, Any] = {}

    def __enter__(self) -> "JobControl":
        # Signal handlers belong to the main thread (a test may run a launcher elsewhere); no job control off Unix.
        if hasattr(signal, "SIGTSTP") and threading.current_thread() is threading.main_thread():
            self._before = {signal.SIGTSTP: signal.signal(signal.SIGTSTP, self._on_tstp),
                            signal.SIGCONT: signal.signal(signal.SIGCONT, self._on_cont)}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)

    def _signal_ranks(self, sig: int) -> None:
        for p in list(self.procs):
            if p.returncode is None:  # not reaped, so its pid (and group) is still the rank's
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def _on_tstp(self, signum: int, frame: Any) -> None:
        self._signal_ranks(signal.SIGSTOP)
        # Stopped in full before we are: `kill -9` on the job, once the shell says "Stopped", must find
        # ranks the kernel counts as stopped (module docstring).
        _await_stopped([p.pid for p in list(self.procs) if p.returncode is None])
        t0 = time.monotonic()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signal.SIGTSTP)  # stops here; returns once continued
        finally:
            signal.signal(signal.SIGTSTP, self._on_tstp)
            self._signal_ranks(signal.SIGCONT)  # also if the kernel dropped our stop (orphaned group)
        self.resumed_at = time.monotonic()
        self.paused_s = self.resumed_at - t0

    def _on_cont(self, signum: int, frame: Any) -> None:
        # Continued after a stop that did not pass through _on_tstp (a SIGSTOP from outside, ranks
        # stopped by hand): continue the ranks too; continuing a running rank is harmless.
        self._signal_ranks(signal.SIGCONT)

    def pause_note(self, timeout_s: float) -> str:
        """Why a rank failed right after `fg`, if the last pause could be the cause: a collective in
        flight at Ctrl-Z times out at once when the pause outlasted timeout_s."""
        if self.paused_s <= timeout_s or time.monotonic() - self.resumed_at > NOTE_WITHIN_S:
            return ""
        return (f" (the job was suspended for {self.paused_s:.0f} s, longer than trainer.timeout_s={timeout_s:g}:"
                " a collective in flight at Ctrl-Z times out when continued; raise trainer.timeout_s"
                " to suspend for longer)")
