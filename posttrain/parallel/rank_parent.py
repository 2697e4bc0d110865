"""A rank started by the local launcher (launch.py run_ranks) ends when its launcher does.

    die_with_launcher()   # each rank, as it starts (mesh.init_group)

The launcher puts its ranks in a process group of their own, so that a terminal's Ctrl-C reaches the
launcher alone (it hands it to rank 0, which checkpoints with the other ranks alive; Ctrl-Z too, and
it stops the ranks itself: job_control.py). The same
separation keeps a terminal's hang-up and a SIGKILL of the launcher from reaching the ranks: they
would go on training as orphans. The kernel's parent-death signal closes that gap.
"""

from __future__ import annotations

import os
import signal
import sys

LAUNCHER_PID = "POSTTRAIN_LAUNCHER_PID"  # set on each rank run_ranks starts


def die_with_launcher() -> None:
    """Called by each rank as it starts (mesh.init_group): the ranks live in a process group of their
    own (Ctrl-C goes to the launcher alone), so a terminal's hang-up or a SIGKILL of the launcher no
    longer reaches them; the kernel sends this rank SIGTERM once its launcher is gone (Linux
    PR_SET_PDEATHSIG), and a launcher already gone ends it now. Elsewhere, or not launched by
    run_ranks (torchrun, Ray actors), it does nothing."""
    launcher = os.environ.get(LAUNCHER_PID)
    if not launcher or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != int(launcher):  # it died before the line above: nobody would send the signal
        os.kill(os.getpid(), signal.SIGTERM)
