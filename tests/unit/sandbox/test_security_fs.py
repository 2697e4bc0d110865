"""Adversarial: the filesystem. Each test asserts containment and the reported status."""

from __future__ import annotations

import os
import secrets
import tempfile

import pytest

SECRET = "canary-" + secrets.token_hex(8)


@pytest.fixture(scope="module")
def canary():
    d = tempfile.mkdtemp(prefix="pt-canary-")
    path = os.path.join(d, "secret.txt")
    with open(path, "w") as f:
        f.write(SECRET)
    os.chmod(d, 0o755)
    os.chmod(path, 0o644)  # world-readable on the host: only isolation keeps it out
    yield path
    os.remove(path)
    os.rmdir(d)


TRY_READ = """
import sys
for p in sys.argv[1:]:
    try:
        print(p, open(p).read())
    except OSError as e:
        print(p, "blocked", type(e).__name__)
"""


def test_read_host_canary_directly(py, canary):
    r = py(TRY_READ.replace("sys.argv[1:]", repr([canary])))
    assert r.status == "ok" and SECRET not in r.stdout and "blocked" in r.stdout


def test_read_host_canary_via_proc_1_root(py, canary):
    r = py(TRY_READ.replace("sys.argv[1:]", repr([f"/proc/1/root{canary}", f"/proc/self/root{canary}"])))
    assert r.status == "ok" and SECRET not in r.stdout and r.stdout.count("blocked") == 2


def test_read_host_canary_via_dotdot(py, canary):
    r = py(TRY_READ.replace("sys.argv[1:]", repr(["/work/../../.." + canary, "../../../../" + canary])))
    assert r.status == "ok" and SECRET not in r.stdout and r.stdout.count("blocked") == 2


def test_symlink_in_workspace_never_reads_host_file(exec_, canary):
    r = exec_(["sh", "-c", f"ln -s {canary} out.txt; mkdir d; ln -s {os.path.dirname(canary)} d/up; cat out.txt; echo rc=$?"], read_files=["out.txt", "d/up/secret.txt"])
    assert r.status == "ok" and SECRET not in r.stdout and dict(r.files) == {}
    assert any(c.path == "out.txt" and c.change == "added" for c in r.files_changed)


def test_write_outside_workspace_fails(py):
    targets = ["/usr/pt_evil", "/etc/pt_evil", "/opt/python/pt_evil", "/pt_evil", "/proc/sys/kernel/hostname", "/opt/pt_evil"]
    src = f"""
for p in {targets!r}:
    try:
        open(p, "w").write("x"); print("WROTE", p)
    except OSError as e:
        print("blocked", p)
"""
    r = py(src)
    assert r.status == "ok" and "WROTE" not in r.stdout and r.stdout.count("blocked") == len(targets)
    assert not any(os.path.exists(p) for p in ("/usr/pt_evil", "/etc/pt_evil", "/pt_evil"))


def test_dev_mem_and_block_devices_absent(exec_):
    r = exec_(["sh", "-c", "for d in /dev/mem /dev/kmem /dev/port /dev/sda /dev/vda /dev/nvme0n1; do cat $d >/dev/null 2>&1 && echo OPEN $d; done; "
               "ls /dev; mknod /dev/shm/x b 8 0 2>/dev/null && echo MKNOD; echo done"])  # fmt: skip
    assert r.status == "ok" and "OPEN" not in r.stdout and "MKNOD" not in r.stdout and r.stdout.endswith("done\n")
    assert not set(r.stdout.split()) & {"mem", "kmem", "sda", "vda", "port"}


def test_workspace_is_fresh_each_execution(exec_):
    first = exec_(["sh", "-c", "echo left > leftover; echo t > /tmp/leftover"])
    second = exec_(["sh", "-c", "ls -A /work /tmp"])
    assert first.status == "ok" and second.status == "ok" and "leftover" not in second.stdout
