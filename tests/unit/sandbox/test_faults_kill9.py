"""kill -9 of a process holding warm sandbox slots leaves no cgroup behind: its reaper
(sandbox/reaper.py) removes them when the process dies; stale ones are swept at start."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.sandbox import cgroups

CHILD = r"""
import asyncio, json, sys
from posttrain.sandbox import SandboxPool, reaper

pool = SandboxPool(concurrency=2, mode="pooled")
asyncio.run(pool.warm(n=2))
dirs = [str(d) for zs in pool._idle.values() for z in zs if z.cg for d in z.cg.dirs.values()]
print(json.dumps({"dirs": dirs, "reaper": reaper.reaper_pid()}), flush=True)
sys.stdin.read()  # until killed
"""


def _wait_exit(pid: int, timeout_s: float = 60.0) -> bool:
    """Block until `pid` (not our child) exits: a pidfd becomes readable then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


def _start_child() -> tuple[subprocess.Popen, dict]:
    if not cgroups.kind():
        pytest.skip("no writable cgroup on this machine")
    root = Path(__file__).resolve().parents[3]
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, start_new_session=True)
    info = json.loads(p.stdout.readline())
    assert info["dirs"] and all(Path(d).is_dir() for d in info["dirs"]) and info["reaper"]
    return p, info


@pytest.mark.parametrize("how", ["pid", "process_group"])
def test_kill9_of_the_trainer_removes_its_cgroups(how):
    p, info = _start_child()
    if how == "pid":
        p.kill()
    else:  # the whole process group, as a job scheduler or a terminal would
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert _wait_exit(info["reaper"]), "the reaper never finished"
    assert [d for d in info["dirs"] if Path(d).exists()] == []


def test_stale_cgroups_of_a_dead_process_are_swept_at_start():
    if not cgroups.kind():
        pytest.skip("no writable cgroup on this machine")
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    own = cgroups._own_paths()
    made = []
    for c in ("memory", "pids", "cpuacct"):
        if c in own:
            d = cgroups.ROOT / c / own[c].lstrip("/") / f"{cgroups.name_prefix(dead.pid)}0"
            d.mkdir()
            made.append(d)
    if cgroups.psi_parent() is not None:
        d = cgroups.psi_parent() / f"{cgroups.name_prefix(dead.pid)}0"
        d.mkdir()
        made.append(d)
    assert made
    assert cgroups.sweep_stale() >= len(made)
    assert [d for d in made if d.exists()] == []
