"""Adversarial: memory, disk, output and network."""

from __future__ import annotations

import os
import socket

import pytest

from posttrain.types import ExecLimits


def test_memory_bomb_is_oom(py):
    src = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"
    r = py(src, limits=ExecLimits(memory_mb=96))
    assert r.status == "oom" and r.signal == 9 and r.peak_memory_bytes < 200 << 20


def test_disk_fill_is_capped(py, mode):
    src = """
import os
n = 0
try:
    with open("big", "wb") as f:
        while n < (1 << 30):
            f.write(b"x" * (1 << 20)); f.flush(); n += 1 << 20
except OSError as e:
    print("stopped", e.errno)
print(n >> 20)
"""
    before = os.statvfs("/dev/shm")
    r = py(src, limits=ExecLimits(workspace_mb=16, fsize_mb=32, memory_mb=64))
    after = os.statvfs("/dev/shm")
    if mode == "pooled":  # a size-capped tmpfs: ENOSPC at the cap
        assert r.status == "ok" and r.stdout.startswith("stopped 28\n") and int(r.stdout.split()[-1]) <= 16
    else:  # a host tmpfs dir charged to the memory cgroup, plus RLIMIT_FSIZE
        assert r.status in ("oom", "nonzero_exit", "ok") and not r.stdout.endswith("1024\n")
    assert (before.f_bfree - after.f_bfree) * before.f_frsize < 8 << 20  # nothing left on the host


def test_200mb_of_output_is_cut(exec_):
    r = exec_(["python3", "-c", "import sys\nfor _ in range(200): sys.stdout.buffer.write(b'x' * (1 << 20))"], limits=ExecLimits(output_bytes=1 << 20, wall_s=20))
    assert r.status == "output_limit" and r.stdout_truncated and len(r.stdout) == 1 << 20


def test_stderr_flood_is_cut(exec_):
    r = exec_(["sh", "-c", "yes err >&2"], limits=ExecLimits(output_bytes=4096, wall_s=20))
    assert r.status == "output_limit" and r.stderr_truncated and len(r.stderr) == 4096 and not r.stdout_truncated


@pytest.fixture()
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(5)
    s.settimeout(0.5)
    yield s
    s.close()


def test_host_loopback_listener_unreachable(py, listener):
    port = listener.getsockname()[1]
    src = f"""
import socket
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", {port})); print("CONNECTED")
except OSError as e:
    print("blocked", type(e).__name__)
"""
    r = py(src)
    assert r.status == "ok" and r.stdout.startswith("blocked")
    with pytest.raises(socket.timeout):
        listener.accept()


def test_no_network_interfaces_but_loopback(exec_):
    r = exec_(["sh", "-c", "ls /sys/class/net 2>/dev/null || cat /proc/net/dev"])
    assert r.status == "ok"
    ifaces = {line.split(":")[0].strip() for line in r.stdout.splitlines() if ":" in line} or set(r.stdout.split())
    assert ifaces <= {"lo"}


def test_loopback_works_inside(py):
    src = """
import socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
port = srv.getsockname()[1]
c = socket.create_connection(("127.0.0.1", port)); a, _ = srv.accept(); c.sendall(b"ping"); print(a.recv(4).decode())
"""
    r = py(src)
    assert (r.status, r.stdout) == ("ok", "ping\n")


def test_program_is_never_oom_protected(py, mode):
    """The warm zygote runs at oom_score_adj -1000; the program must not inherit that."""
    r = py("print(open('/proc/self/oom_score_adj').read())")
    assert r.status == "ok"
    score = int(r.stdout)
    assert score >= 0
    if mode == "pooled":
        assert score == 1000  # raised on purpose: the kernel kills the program, never the zygote
