"""Fresh-process mode: one new bwrap sandbox per execution.

Flow: stage files in a new workspace; start bwrap blocked (--block-fd) and learn its
sandbox pid (--info-fd); put both processes in a new cgroup and lower their rlimits;
release it; capture output with caps; kill on wall time or output overflow; list the
workspace changes; remove workspace and cgroup. Killing bwrap kills the sandbox's pid 1
(--die-with-parent), which takes the whole pid namespace with it, double-forked and
setsid daemons included; the cgroup sweep is the second line.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Mapping, Sequence

from posttrain.sandbox import limits as lim
from posttrain.sandbox.bwrap import bwrap_argv, fixed_env, run_as
from posttrain.sandbox.launch import launch
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.images import Image
from posttrain.sandbox.result import Outcome, finish
from posttrain.sandbox.runtime import workspace_root
from posttrain.sandbox.streams import CappedReader, feed, wait_pidfd
from posttrain.sandbox.workspace import Workspace, diff
from posttrain.types import ExecLimits, ExecResult


async def run_fresh(
    cmd: Sequence[str],
    files: Mapping[str, "str | bytes"] | None,
    stdin: bytes,
    limits: ExecLimits,
    image: Image,
    read_files: Sequence[str] = (),
) -> ExecResult:
    uid = run_as()
    ws = Workspace.create(workspace_root(), uid)
    cg: Cgroup | None = None
    try:
        before = ws.write_files(files)
        cg = Cgroup.create(int(limits.memory_mb * lim.MB), int(limits.pids) + 2)
        return await _run(cmd, stdin, limits, image, ws, cg, before, read_files)
    finally:
        if cg is not None:
            cg.remove()
        ws.remove()


async def _run(cmd, stdin, limits, image, ws, cg, before, read_files) -> ExecResult:
    in_r, in_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    memory_by_cg = cg is not None and cg.has("memory")
    pids_by_cg = cg is not None and cg.has("pids")
    t0 = time.perf_counter()
    table = lim.rlimits(limits, memory_by_cg, pids_by_cg)
    inside = os.path.exists("/usr/bin/prlimit")
    full = [*lim.prlimit_prefix(table), *cmd] if inside else list(cmd)
    launched = launch(
        lambda extra: bwrap_argv(full, ws.path, fixed_env(image.pythonpath), image.binds(), extra=extra),
        (in_r, out_w, err_w), cg, None if inside else table,
    )  # fmt: skip
    proc = launched.proc
    out = Outcome()
    out.enforcement = lim.enforcement(memory_by_cg, pids_by_cg, cg.version if cg else "", "memory cgroup (tmpfs pages) + RLIMIT_FSIZE" if memory_by_cg else "RLIMIT_FSIZE")

    def kill(reason: str) -> None:
        if out.killed is None:
            out.killed = reason
        try:
            proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        if cg is not None:
            cg.kill_all(0.5)

    cap = int(limits.output_bytes)
    so = CappedReader(out_r, cap, lambda: kill("output_limit"))
    se = CappedReader(err_r, cap, lambda: kill("output_limit"))
    stdin_task = asyncio.ensure_future(feed(in_w, stdin))
    timer = asyncio.get_running_loop().call_later(float(limits.wall_s), kill, "timeout")
    try:
        await wait_pidfd(proc.pid)
        _pid, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        timer.cancel()
    out.wall_s = time.perf_counter() - t0
    if cg is not None:
        cg.kill_all()  # anything that escaped pid-1 death (should be nothing)
    await _drain(so, se)
    stdin_task.cancel()
    out.exit_code = proc.returncode
    out.cpu_s = (cg.cpu_seconds() if cg else None) or (rusage.ru_utime + rusage.ru_stime)
    out.peak = cg.peak_memory() if cg is not None else rusage.ru_maxrss * 1024
    out.oom = cg.oom_since_reset() if cg is not None else False
    after = ws.manifest()
    files_out = {}
    for rel in read_files:
        try:
            files_out[rel] = ws.read(rel, cap).decode("utf-8", errors="replace")
        except Exception:  # noqa: BLE001 - a missing/odd file is simply not returned
            pass
    return finish(out, so, se, limits, image.digest, diff(before, after), files_out, cmd)


async def _drain(*readers: CappedReader) -> None:
    """Pipes close when the last holder dies; the namespace is dead, so that is now."""
    try:
        await asyncio.wait_for(asyncio.gather(*(r.done for r in readers)), 2.0)
    except asyncio.TimeoutError:
        pass
    for r in readers:
        r.close()
