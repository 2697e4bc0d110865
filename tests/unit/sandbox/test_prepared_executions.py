"""Adversarial: what a warm slot prepares ahead, and what it lets overlap, is out of reach.

A pooled slot prepares the next execution (its pid 1 in fresh namespaces) while the
current one runs, and lets the last execution's pid 1 finish exiting while the next one
starts. Neither may be visible to, or harmed
by, a program; and memory an execution leaves held must not shrink the next one's limit.
Every test runs on one slot (concurrency 1), attacker first, victim after.
"""

from __future__ import annotations

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.types import ExecLimits

# Tries every pid a namespace could hold: signal 0 finds who is there, SIGSTOP/SIGKILL
# would hurt the prepared next execution if it were reachable.
HUNT = """
import os, signal
me = os.getpid()
seen = []
for pid in range(1, 4096):
    if pid == me:
        continue
    try:
        os.kill(pid, 0)
        seen.append(pid)
        os.kill(pid, signal.SIGSTOP); os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print(seen)
"""


@pytest.fixture(scope="module")
def one_pool(runner):
    pool = SandboxPool(concurrency=1, mode="pooled")
    yield pool
    runner.run(pool.close())


@pytest.fixture()
def slot(runner, one_pool):
    return lambda cmd, **kw: runner.run(one_pool.exec(cmd, **kw))


def test_the_prepared_next_execution_is_invisible_and_unharmed(slot):
    for _ in range(3):  # each attacker runs while the next execution is being prepared
        a = slot(["python3", "-c", HUNT])
        assert (a.status, a.stdout) == ("ok", "[1]\n"), a  # only its own pid 1, which ignores both signals
    b = slot(["python3", "-c", "import os; print(os.getpid(), os.getppid())"])
    assert (b.status, b.stdout) == ("ok", "2 1\n"), b


def test_the_program_holds_no_capability_and_no_inherited_fd(slot):
    src = "import os\nprint(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\nprint(sorted(os.listdir('/proc/self/fd')))"
    r = slot(["python3", "-c", src])
    assert (r.status, r.stdout) == ("ok", "0000000000000000\n['0', '1', '2', '3']\n"), r  # 3: the listdir itself


HOLD_SYSV = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for _ in range(2):  # 2 x 40 MiB of SysV shared memory, touched, left behind (lives as long as the IPC namespace)
    sid = libc.shmget(0, 40 << 20, 0o1600)
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 40 << 20)
print("held")
"""
HOLD_SHM = "open('/dev/shm/ballast', 'wb').write(b'x' * (80 << 20))\nprint('held')"
USE_100 = "b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('fit')"


@pytest.mark.parametrize("hold", [HOLD_SYSV, HOLD_SHM], ids=["sysv-shm", "dev-shm"])
def test_memory_left_held_never_squeezes_the_next_limit_nor_costs_the_slot(slot, one_pool, hold):
    """80 MiB held at exit are still being freed while the next execution would start: it
    must get its whole memory_mb anyway (a false OOM would be a wrong score), and the slot
    must wait for them rather than be thrown away as contaminated."""
    deaths = one_pool.stats()["slot_deaths"]
    for _ in range(3):
        a = slot(["python3", "-c", hold], limits=ExecLimits(memory_mb=256, workspace_mb=128, fsize_mb=128))
        assert (a.status, a.stdout) == ("ok", "held\n"), a
        b = slot(["python3", "-c", USE_100], limits=ExecLimits(memory_mb=128))
        assert (b.status, b.stdout) == ("ok", "fit\n"), b
    assert one_pool.stats()["slot_deaths"] == deaths


def test_the_next_execution_sees_nothing_of_one_still_exiting(slot):
    a = slot(["bash", "-c", "ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; echo x > /dev/shm/left; echo x > /tmp/left; echo made"])
    assert (a.status, a.stdout) == ("ok", "made\n"), a
    b = slot(["bash", "-c", "ipcs -m -q | grep -c '^0x'; ls -A /dev/shm /tmp /work | grep -c left"])
    assert (b.status, b.stdout) == ("nonzero_exit", "0\n0\n"), b
