"""Cgroup bookkeeping that a warm slot relies on between executions."""

from __future__ import annotations

import subprocess

import pytest

from posttrain.sandbox.cgroups import Cgroup


@pytest.fixture()
def cg():
    c = Cgroup.create(256 << 20, 16)
    if c is None:
        pytest.skip("no writable cgroup on this machine")
    yield c
    assert c.remove()


def test_procs_forgets_a_process_as_soon_as_it_is_reaped(cg):
    p = subprocess.Popen(["sleep", "30"])
    cg.add(p.pid)
    assert cg.procs() == [p.pid]
    p.kill()
    p.wait()
    assert cg.procs() == []  # a kept-open cgroup.procs (v1 pid-list cache) would still list it


def test_limits_follow_every_change_up_and_down(cg):
    for mb in (300, 100, 200, 200, 50):
        cg.set_limits(mb << 20, 8)
        if cg.version == "v1":
            got = int((cg.dirs["memory"] / "memory.limit_in_bytes").read_text())
        else:
            got = int((cg.dirs[""] / "memory.max").read_text())
        assert got == mb << 20
