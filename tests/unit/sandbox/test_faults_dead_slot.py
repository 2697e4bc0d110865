"""A zygote that dies (killed between or during executions) is recycled, counted, and its
requests re-run on a new slot: no execution after the death is a sandbox_error."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.types import ExecLimits


def zygote_interpreter_pid(z) -> int:
    """The zygote's Python process inside its bwrap (not bwrap, not bwrap's pid 1)."""
    for pid in z.cg.procs():
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith((b"python3", b"python")) and any(a.endswith(b"zygote_main.py") for a in argv):
            return pid
    raise AssertionError(f"no zygote interpreter among {z.cg.procs()}")


def idle_slots(pool: SandboxPool) -> list:
    return [z for zs in pool._idle.values() for z in zs]


@pytest.fixture()
def pool(runner):
    p = SandboxPool(concurrency=2, mode="pooled")
    runner.run(p.warm(n=2))
    if any(z.cg is None for z in idle_slots(p)):
        runner.run(p.close())
        pytest.skip("no writable cgroup: cannot find the zygote to kill")
    yield p
    runner.run(p.close())


def _kill_and_reap(z) -> None:
    os.kill(zygote_interpreter_pid(z), signal.SIGKILL)
    z.launched.proc.wait(timeout=30)  # bwrap exits with its child (--die-with-parent): event, not sleep


def test_zygote_killed_while_idle_is_replaced_and_counted(pool, run):
    for z in idle_slots(pool):
        _kill_and_reap(z)
    results = [run(pool.exec, ["python3", "-c", "print(6*7)"]) for _ in range(4)]
    assert [r.status for r in results] == ["ok"] * 4 and all(r.stdout == "42\n" for r in results)
    assert pool.stats()["slot_deaths"] == 2
    assert pool.stats()["last_slot_error"] == "zygote exited while idle"


def test_send_to_a_dead_zygote_marks_the_slot_dead_and_reruns_the_request(pool, run, monkeypatch):
    from posttrain.sandbox import pool as pool_mod

    first = idle_slots(pool)[-1]  # the idle list is a stack: this one serves the next request
    _kill_and_reap(first)
    monkeypatch.setattr(pool_mod, "_exited", lambda _z: False)  # looks alive: the send itself must notice
    r = run(pool.exec, ["python3", "-c", "print('after')"])
    assert r.status == "ok" and r.stdout == "after\n"  # re-run on a new slot
    assert first.dead and first not in idle_slots(pool)
    s = pool.stats()
    assert s["slot_deaths"] == 1 and s["dead_slot_retries"] == 1
    assert "Broken pipe" in s["last_slot_error"] or "BrokenPipe" in s["last_slot_error"]


def test_slot_killed_mid_execution_costs_one_retry_not_a_sandbox_error(pool, runner):
    from posttrain.sandbox.zygote import _PREPARED_PROCS, _ZYGOTE_PROCS

    z = idle_slots(pool)[-1]  # the idle list is a stack: this slot serves the request
    base = _ZYGOTE_PROCS + _PREPARED_PROCS  # the slot with its next execution (C2 and C3) fully prepared

    async def scenario():
        for _ in range(6000):  # C2 forks C3 after "ready": counting earlier, a busy host let the next
            if z.cg.count_procs() >= base:  # step see C3 appear and kill the slot before any request
                break
            await asyncio.sleep(0.005)
        task = asyncio.ensure_future(pool.exec(["python3", "-c", "import time; time.sleep(1); print('done')"],
                                               limits=ExecLimits(wall_s=30)))
        while z.cg.count_procs() <= base and not task.done():  # the request was taken: the next C2 is cloned
            await asyncio.sleep(0.005)
        z.cg.kill_all()  # zygote, its execution's pid 1 and the program, all at once
        return await task

    r = runner.run(scenario())
    assert r.status == "ok" and r.stdout == "done\n"
    assert z.dead and z not in idle_slots(pool)
    assert pool.stats()["slot_deaths"] == 1 and pool.stats()["dead_slot_retries"] == 1


def test_a_slot_dying_on_every_try_is_sandbox_error_not_a_score(pool, run, monkeypatch):
    from posttrain.sandbox.zygote import Zygote

    real_exec = Zygote.exec

    async def always_die(self, *a, **kw):  # the whole slot dies: zygote and its prepared execution
        self.cg.kill_all()
        return await real_exec(self, *a, **kw)

    monkeypatch.setattr(Zygote, "exec", always_die)
    r = run(pool.exec, ["python3", "-c", "print(1)"])
    monkeypatch.setattr(Zygote, "exec", real_exec)
    assert r.status == "sandbox_error" and "warm slot failed" in r.error
    assert pool.stats()["slot_deaths"] == 2
    assert run(pool.exec, ["python3", "-c", "print(2)"]).stdout == "2\n"  # and the pool still works
