"""Episodes in Debian-rootfs images: a throwaway overlay each, the sandbox's limits and isolation inside.

Adversarial: an episode writes everywhere it can, leaves background processes, /dev/shm
and /tmp files, edits the image's binaries -- and the next episode, the image on the host
and the host itself see none of it. The escape-suite classes (filesystem, network,
processes, resources) are checked inside the image.
"""

from __future__ import annotations

import pytest

from posttrain.types import ExecLimits


@pytest.fixture()
def iexec(runner, pools, debian_image):
    """iexec(cmd_str, **kw) -> ExecResult of `bash -c cmd_str` in the test image."""

    def _exec(cmd, **kw):
        return runner.run(pools("pooled").exec(["bash", "-c", cmd], image=debian_image.digest, **kw))

    return _exec


def test_the_image_is_the_root(iexec):
    r = iexec("cat main.py; python3 main.py; jq -n '1+1'; git --version; echo $GREETING; pwd; id -u")
    assert r.status == "ok", r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "hello from the image" and lines[2] == "2" and lines[3].startswith("git version")
    assert lines[4:] == ["hi", "/app", "0"]


def test_files_stdin_and_read_files(iexec):
    r = iexec("read x; tr a-z A-Z < in.txt > out.txt; echo $x", files={"in.txt": "abc"}, stdin="piped\n", read_files=["out.txt"])
    assert (r.status, r.stdout, dict(r.files)) == ("ok", "piped\n", {"out.txt": "ABC"})
    assert {c.path for c in r.files_changed} == {"out.txt"}


def test_nothing_of_one_episode_reaches_the_next(iexec, debian_image):
    plant = ("echo evil > /usr/bin/python3; echo x > /etc/planted; echo x > /tmp/t; echo x > /dev/shm/s; echo x > /root/r;"
             " echo x > /app/main.py; (setsid sleep 300 &); nohup sleep 300 >/dev/null 2>&1 & echo planted")
    assert iexec(plant).stdout == "planted\n"
    r = iexec("python3 main.py; ls /etc/planted /tmp/t /dev/shm/s /root/r 2>&1 | grep -c 'No such'; ps -e -o comm= | grep -c sleep")
    assert r.stdout.split("\n")[:3] == ["hello from the image", "4", "0"], r.stdout + r.stderr
    assert (debian_image.lowers[-1] / "app" / "main.py").read_text() == 'print("hello from the image")\n'  # the host's copy is intact


def test_setuid_programs_keep_their_bits_and_grant_nothing(iexec):
    r = iexec("stat -c '%a %n' /usr/bin/su /usr/bin/passwd; id -u; su -c 'id -u' root </dev/null; echo rc=$?")
    assert r.status == "ok", r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["4755 /usr/bin/su", "4755 /usr/bin/passwd"]  # as Debian ships them
    assert lines[-1] != "rc=0" or lines[-2] == lines[2]  # su gains no identity the episode did not have


def test_no_network(iexec):
    r = iexec("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\" 2>&1 | tail -1; tail -n +3 /proc/net/dev | cut -d: -f1")
    assert "unreachable" in r.stdout and r.stdout.split("\n")[1:] == ["    lo", ""]


def test_processes_and_host_are_invisible(iexec):
    r = iexec("ps -e -o pid= | wc -l; cat /proc/self/uid_map; ls /work/main 2>&1 | head -1")
    count, uid_map, host = r.stdout.splitlines()
    assert int(count) <= 6 and uid_map.split() == ["0", "59999", "1"] and "No such file" in host


def test_seccomp_and_no_capabilities(iexec):
    r = iexec("grep CapEff /proc/self/status; unshare -U true 2>&1; python3 -c \"import os; os.chroot('/tmp')\" 2>&1 | tail -1")
    lines = r.stdout.splitlines()
    assert lines[0].split()[1] == "0000000000000000"
    assert "Operation not permitted" in lines[1] and "PermissionError" in lines[2]


def test_memory_limit(iexec):
    r = iexec("python3 -c 'x = bytearray(400 << 20); print(len(x))'", limits=ExecLimits(memory_mb=128))
    assert r.status == "oom"


def test_wall_limit_kills_the_episode(iexec):
    r = iexec("sleep 30", limits=ExecLimits(wall_s=1.0))
    assert r.status == "timeout"


FORKER = """
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
"""


def test_fork_bomb_is_contained(iexec):
    r = iexec(f"python3 -c '{FORKER}'", limits=ExecLimits(pids=32, wall_s=20))
    assert r.status == "ok" and 0 < int(r.stdout) < 40  # the cgroup's pids limit (32 + the shell's few) stops it


def test_session_keeps_state_between_steps(run, pools, debian_image):
    async def go():
        async with pools("pooled").session(debian_image.digest) as s:
            a = await s.run("git init -q repo && cd repo && export TAG=v1 && echo x > f")
            b = await s.run("pwd; echo $TAG; ls")
            return a, b, await s.read_file("repo/f")

    a, b, f = run(go)
    assert a.status == "ok" and b.stdout == "/app/repo\nv1\nf\n" and f == b"x\n"


def test_warm_sessions_are_fresh(run, pools, debian_image):
    pool = pools("pooled")

    async def go():
        await pool.warm(debian_image.digest)
        async with pool.session(debian_image.digest) as s:
            await s.run("echo dirty > /app/main.py; echo x > /tmp/left")
        async with pool.session(debian_image.digest) as s:
            return await s.run("cat main.py; ls /tmp")

    r = run(go)
    assert r.stdout == 'print("hello from the image")\n' and pool.warm_sessions.hits >= 1
