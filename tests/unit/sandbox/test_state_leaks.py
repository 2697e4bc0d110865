"""Adversarial: nothing of an execution survives it, in pooled and fresh mode.

Each test runs an attacker execution, then a victim execution on the SAME slot (a pool
of concurrency 1, so pooled mode reuses one zygote) and checks that the victim sees a
pristine state: /dev, /dev/shm, /tmp, /work, sockets and ports, IPC, processes, heap,
umask, memory limit.
"""

from __future__ import annotations

import secrets

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.types import ExecLimits


@pytest.fixture(scope="module")
def one_slot(runner):
    made: dict[str, SandboxPool] = {}
    yield lambda mode: made.setdefault(mode, SandboxPool(concurrency=1, mode=mode))
    for p in made.values():
        runner.run(p.close())


@pytest.fixture()
def seq(runner, one_slot, mode):
    """seq(cmd, **kw) -> ExecResult, always on the same single slot of `mode`."""
    return lambda cmd, **kw: runner.run(one_slot(mode).exec(cmd, **kw))


def sh(seq, script, **kw):
    return seq(["bash", "-c", script], **kw)


def test_dev_and_dev_shm_files_do_not_survive(seq):
    a = sh(seq, "echo x > /dev/leak 2>/dev/null && echo WROTE_DEV; echo x > /dev/shm/leak && echo WROTE_SHM; mkdir /dev/shm/d && echo ok")
    assert a.status == "ok" and "WROTE_DEV" not in a.stdout and "WROTE_SHM" in a.stdout  # /dev is read-only, /dev/shm works
    b = sh(seq, "ls -A /dev/shm; ls /dev | grep -c leak")
    assert b.status == "nonzero_exit" and b.stdout == "0\n"  # grep -c found nothing: empty /dev/shm, no /dev/leak


def test_dev_symlinks_cannot_be_replaced(seq):
    attack = "for l in stdin stdout stderr fd; do ln -sfn /work/evil /dev/$l 2>/dev/null && echo HIJACKED $l; rm -rf /dev/$l 2>/dev/null && echo REMOVED $l; done; echo done"
    a = sh(seq, attack)
    assert a.status == "ok" and a.stdout == "done\n"
    b = sh(seq, "cat /dev/stdin; echo to-stdout > /dev/stdout; echo to-stderr > /dev/stderr; readlink /dev/fd /dev/stdin", stdin="from-stdin\n")
    assert b.stdout == "from-stdin\nto-stdout\n/proc/self/fd\n/proc/self/fd/0\n" and b.stderr == "to-stderr\n"


def test_process_substitution_compares_for_real_after_an_attack(seq):
    """The Harbor trick: an earlier execution re-points /dev/fd so `diff <(...) expected` always passes."""
    a = sh(seq, "rm -rf /dev/fd; ln -s /work /dev/fd; echo tried")
    assert a.status == "ok"
    same = sh(seq, "diff <(echo 42) <(echo 42) && echo SAME")
    differ = sh(seq, "diff <(echo 41) <(echo 42) >/dev/null; echo rc=$?")
    assert same.stdout == "SAME\n" and differ.stdout == "rc=1\n"


def test_dev_shm_left_full_neither_accumulates_nor_raises_the_memory_limit(seq):
    """Leaving 40 MiB in /dev/shm 4 times must not let a later program use more than memory_mb."""
    fill = "import os\nassert os.listdir('/dev/shm') == [], os.listdir('/dev/shm')\nopen('/dev/shm/ballast', 'wb').write(os.urandom(40 << 20))\nprint('left')"
    for _ in range(4):
        r = seq(["python3", "-c", fill], limits=ExecLimits(memory_mb=256, workspace_mb=64))
        assert (r.status, r.stdout) == ("ok", "left\n"), r
    hog = "b = bytearray(220 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('fit')"
    over = seq(["python3", "-c", hog], limits=ExecLimits(memory_mb=128))
    fits = seq(["python3", "-c", hog.replace("220", "64")], limits=ExecLimits(memory_mb=128))
    assert over.status == "oom" and (fits.status, fits.stdout) == ("ok", "fit\n")


LEAVE_LISTENER = """
import os, socket
tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); tcp.bind(("127.0.0.1", 40123)); tcp.listen(8)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 40124))
a, b = socket.socketpair()
# The cycle: b's receive queue holds a, b and the listeners, so once every fd is closed
# they are referenced only from inside an in-flight message nobody can receive.
socket.send_fds(a, [b"x"], [a.fileno(), b.fileno(), tcp.fileno(), udp.fileno()])
os.closerange(3, 1 << 16)
print("left")
"""

PROBE_LISTENER = """
import socket
try:
    socket.create_connection(("127.0.0.1", 40123), timeout=1); print("CONNECTED")
except OSError:
    print("refused")
for typ, port in ((socket.SOCK_STREAM, 40123), (socket.SOCK_DGRAM, 40124)):
    socket.socket(socket.AF_INET, typ).bind(("127.0.0.1", port)); print("bound")
"""


def test_a_listener_held_by_an_scm_rights_cycle_does_not_survive(runner, mode):
    """On a new slot (on a slot that ran other programs first the kernel's unix GC may
    already have collected such a cycle, which would hide a leak)."""
    pool = SandboxPool(concurrency=1, mode=mode)
    try:
        a = runner.run(pool.exec(["python3", "-c", LEAVE_LISTENER]))
        assert (a.status, a.stdout) == ("ok", "left\n"), a
        for _ in range(3):  # the very next execution first, and never later either
            b = runner.run(pool.exec(["python3", "-c", PROBE_LISTENER]))
            assert (b.status, b.stdout) == ("ok", "refused\nbound\nbound\n"), b
    finally:
        runner.run(pool.close())


LEAVE_ABSTRACT_AND_PTY = """
import os, pty, socket
abst = socket.socket(socket.AF_UNIX); abst.bind("\\0pt-leak"); abst.listen(8)
master, slave = pty.openpty(); os.write(master, b"pty-secret\\n")
a, b = socket.socketpair()
socket.send_fds(a, [b"x"], [a.fileno(), b.fileno(), abst.fileno(), master, slave])
os.closerange(3, 1 << 16)
print("left")
"""

PROBE_ABSTRACT_AND_PTY = """
import os, socket
try:
    socket.socket(socket.AF_UNIX).connect("\\0pt-leak"); print("ABSTRACT")
except OSError:
    print("no-abstract")
socket.socket(socket.AF_UNIX).bind("\\0pt-leak"); print("bound")
print(sorted(os.listdir("/dev/pts")))
"""


def test_abstract_unix_sockets_and_ptys_do_not_survive(seq):
    a = seq(["python3", "-c", LEAVE_ABSTRACT_AND_PTY])
    assert (a.status, a.stdout) == ("ok", "left\n"), a
    b = seq(["python3", "-c", PROBE_ABSTRACT_AND_PTY])
    assert (b.status, b.stdout) == ("ok", "no-abstract\nbound\n['ptmx']\n"), b


HEAP_SCAN = """
import re, sys
parts = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in zip(sys.argv[1::2], sys.argv[2::2])]
hits = set()
mem = open("/proc/self/mem", "rb", buffering=0)
for line in open("/proc/self/maps").read().splitlines():
    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (r...)", line)
    if not m or "[v" in line:
        continue
    lo, hi = int(m[1], 16), int(m[2], 16)
    for off in range(lo, hi, 1 << 20):
        try:
            mem.seek(off); data = mem.read(min(1 << 20, hi - off) + 64)
        except OSError:
            continue
        for i, (head, tail) in enumerate(parts):  # the whole secret never exists in this process unless it leaked
            j = data.find(head)
            while j >= 0:
                if data[j + len(head): j + len(head) + len(tail)] == tail:
                    hits.add(i)
                j = data.find(head, j + 1)
print("hits", sorted(hits))
"""


def test_an_in_process_execution_cannot_read_earlier_argv_or_files_from_its_heap(seq):
    # ~600 bytes each: above pymalloc's small-object limit, where freed buffers keep their bytes
    argv_secret, file_secret = "argvsecret" + secrets.token_hex(300), "filesecret" + secrets.token_hex(300)
    victim = "import sys\ndata = open('data.txt').read()\nprint(len(sys.argv[1]) + len(data))"
    for _ in range(2):
        r = seq(["python3", "main.py", argv_secret], files={"main.py": victim, "data.txt": file_secret})
        assert r.status == "ok"
    halves = [s.encode().hex() for secret in (argv_secret, file_secret) for s in (secret[:12], secret[12:40])]
    r = seq(["python3", "-c", HEAP_SCAN, *halves], limits=ExecLimits(wall_s=30))
    assert (r.status, r.stdout) == ("ok", "hits []\n"), r


def test_in_process_stdio_is_pristine_in_every_execution(seq):
    """An in-process program's sys.stdin/stdout/stderr are copies of objects the zygote
    built once, before any request: unflushed output, a reconfigure, a patched method or a
    close in one execution never reaches the next, and they behave as a fresh
    interpreter's own over pipes."""
    attack = (
        "import sys, os\nsys.stdout.write('LEAK-OUT')\nsys.stdout.reconfigure(encoding='ascii', line_buffering=True)\n"
        "sys.stderr.reconfigure(line_buffering=False)\nsys.stderr.write('LEAK-ERR')\nsys.stdout.write = len\n"
        "sys.stdin.close()\nos._exit(0)"
    )
    a = seq(["python3", "-c", attack])
    assert (a.status, a.stdout) == ("ok", "LEAK-OUT"), a  # reconfigure flushed it, as in a real interpreter
    victim = (
        "import sys\nprint(sys.stdin.read(), sys.stdin.closed, sys.stdin.seekable(), sys.stdout.seekable(), sys.stdout.encoding,"
        " sys.stdout.line_buffering, sys.stderr.line_buffering, sys.stdout is sys.__stdout__)\nprint('é', file=sys.stderr)"
    )
    for _ in range(2):
        b = seq(["python3", "-c", victim], stdin="in")
        assert (b.status, b.stdout, b.stderr) == ("ok", "in False False False utf-8 False True True\n", "é\n"), b


def test_sysv_ipc_processes_umask_and_rlimits_do_not_survive(seq):
    a = sh(seq, "ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null && echo ipc; (setsid sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 & umask 000; ulimit -n 8; echo set")
    assert a.status == "ok" and a.stdout == "ipc\nset\n", a
    b = sh(seq, "ipcs -m -q | grep -c '^0x'; ls -d /proc/[0-9]* | wc -l; umask; ulimit -n", limits=ExecLimits(nofile=200))
    lines = b.stdout.split()
    assert lines[0] == "0" and int(lines[1]) <= 4 and lines[2:] == ["0022", "200"], b  # bash, ls/wc and pid 1


def test_tmp_and_environment_do_not_survive(seq):
    a = seq(["python3", "-c", "import os\nos.environ['LEAK'] = '1'\nos.putenv('LEAK2', '1')\nopen('/tmp/leak', 'w').write('x')\nos.chdir('/tmp')"])
    b = sh(seq, "ls -A /tmp /work; env | grep -c LEAK; pwd")
    assert a.status == "ok" and b.stdout.split() == ["/tmp:", "/work:", "0", "/work"], b


FILL = """
import os
total = 0
for d in ("/work", "/tmp", "/dev/shm"):
    try:
        with open(os.path.join(d, "fill"), "wb") as f:
            while total < (1 << 30):
                f.write(b"x" * (1 << 20)); f.flush(); total += 1 << 20
    except OSError as e:
        assert e.errno in (27, 28), e  # ENOSPC, or EFBIG where fsize_mb <= workspace_mb
print(total >> 20)
"""


def test_workspace_mb_caps_work_tmp_and_dev_shm_together(seq):
    r = seq(["python3", "-c", FILL], limits=ExecLimits(workspace_mb=24, memory_mb=512, fsize_mb=1024))
    assert r.status == "ok" and 20 <= int(r.stdout) <= 24, r
    assert r.enforcement["workspace_mb"].startswith("tmpfs size=")


def test_filling_the_workspace_costs_the_host_no_disk_and_no_shared_memory(runner, one_slot, mode):
    """With the default limits, fill /work, /tmp and /dev/shm and hold them: the host's
    free disk and free /dev/shm drop by at most workspace_mb (they should not drop at all)."""
    import asyncio
    import os

    from posttrain.sandbox.runtime import sandbox_home

    cap = ExecLimits().workspace_mb << 20
    paths = ["/dev/shm", str(sandbox_home()), "/tmp"]

    def free() -> list[int]:
        return [os.statvfs(p).f_bavail * os.statvfs(p).f_frsize for p in paths]

    async def go():
        start, lowest = free(), free()
        task = asyncio.ensure_future(one_slot(mode).exec(["python3", "-c", FILL + "import time; time.sleep(2)"], limits=ExecLimits(wall_s=20)))
        while not task.done():
            lowest = [min(a, b) for a, b in zip(lowest, free())]
            await asyncio.sleep(0.02)
        return task.result(), [s - low for s, low in zip(start, lowest)]

    # The free space is the host's: a test on the other worker writing to /tmp at the same moment
    # lowers it too. A leak shows in every try; another test's write in one, so up to 3 tries.
    for _ in range(3):
        r, drops = runner.run(go())
        assert r.status == "ok" and int(r.stdout) == ExecLimits().workspace_mb, r
        if all(d <= cap for d in drops):
            break
    assert all(d <= cap for d in drops), dict(zip(paths, drops))


def test_signalling_pid_1_cannot_turn_a_result_into_a_sandbox_error(seq):
    """A program that makes its own result a sandbox_error escapes its score (verifiers
    treat that as an infra error): every signal it may send to its namespace's pid 1."""
    src = "import os, signal\nfor s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGCHLD, signal.SIGSTOP, signal.SIGKILL):\n    os.kill(1, s)\nprint('still here')\nraise SystemExit(3)"
    r = seq(["python3", "-c", src])
    assert (r.status, r.exit_code, r.stdout) == ("nonzero_exit", 3, "still here\n"), r
    after = seq(["python3", "-c", "print('next')"])
    assert (after.status, after.stdout) == ("ok", "next\n")
