"""One step of a `ShellSession`: send the line, watch output sizes, wait for the marker."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.workspace import diff
from posttrain.types import ExecResult

_POLL_S = 0.02


def _shell_pids(sess) -> set[int]:
    """Host pids that must survive a step kill: bwrap, its pid 1, and bash (pid 1's child)."""
    keep = {sess.launched.proc.pid, sess.launched.child_pid}
    try:
        with open(f"/proc/{sess.launched.child_pid}/task/{sess.launched.child_pid}/children") as f:
            keep.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return keep


def _kill_step(sess) -> None:
    if sess.cg is None:
        return
    keep = _shell_pids(sess)
    for pid in sess.cg.procs():
        if pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


async def _read_marker(sess, n: int, deadline: float, out_cap: int, files: tuple[Path, Path]) -> tuple[int | None, str | None]:
    """(exit code, why-killed). Polls the marker pipe and the output file sizes."""
    want = f"{sess._nonce} {n} ".encode()
    killed = None
    while True:
        try:
            chunk = os.read(sess._out, 4096)
            if not chunk:
                return None, killed or "shell_exited"
            sess._pending += chunk
        except BlockingIOError:
            pass
        while b"\n" in sess._pending:
            line, sess._pending = sess._pending.split(b"\n", 1)
            if line.startswith(want):
                # Output over the cap is over the cap even when the command ended before a poll saw it
                # (a fast writer, a busy machine): the step's status must not depend on that race.
                over = killed is None and any(_size(f) > out_cap for f in files)
                return int(line[len(want) :]), "output_limit" if over else killed
        now = time.monotonic()
        if killed is None and any(_size(f) > out_cap for f in files):
            killed = "output_limit"
            _kill_step(sess)
            deadline = now + 0.5
        elif now > deadline:
            if killed is not None:
                return None, killed + "+shell"  # bash itself did not come back
            killed = "timeout"
            _kill_step(sess)
            deadline = now + 0.5
        await asyncio.sleep(_POLL_S if now - deadline < -0.1 else 0.005)


def _read_capped(path: Path, cap: int) -> tuple[str, bool]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return "", False
    with os.fdopen(fd, "rb") as f:
        data = f.read(cap + 1)
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


async def run_step(sess, cmd: str, wall: float) -> ExecResult:
    n = sess.steps
    lim_ = sess.limits
    try:
        sess.ctl.write(f"c.{n}", cmd.encode() + b"\n")
    except (OSError, SandboxError) as e:  # the session tampered with its own control dir
        sess.closed_reason = f"terminated: control directory unusable ({e})"
        sess._terminate()
        return ExecResult(status="sandbox_error", error=sess.closed_reason, limits=lim_, image_digest=sess.image.digest)
    ctl = sess.ctl.path
    out_f, err_f = ctl / f"o.{n}", ctl / f"e.{n}"
    before = sess._last if n > 1 else sess.ws.manifest()
    if sess.cg is not None:
        sess.cg.set_limits(int(lim_.memory_mb * (1 << 20)), int(lim_.pids) + 3)
    cpu0 = sess.cg.cpu_seconds() if sess.cg else None
    inside = "/.posttrain"
    line = f". {inside}/c.{n} >{inside}/o.{n} 2>{inside}/e.{n} </dev/null; printf '%s %d %d\\n' {sess._nonce} {n} $?\n"
    t0 = time.perf_counter()
    try:
        os.write(sess._in, line.encode())
    except OSError:
        sess.closed_reason = "the shell exited"
        sess._terminate()
        return ExecResult(status="sandbox_error", error="session shell is gone", limits=lim_, image_digest=sess.image.digest)
    code, killed = await _read_marker(sess, n, time.monotonic() + wall, int(lim_.output_bytes), (out_f, err_f))
    wall_s = time.perf_counter() - t0
    stdout, so_t = _read_capped(out_f, int(lim_.output_bytes))
    stderr, se_t = _read_capped(err_f, int(lim_.output_bytes))
    oom = sess.cg.oom_since_reset() if sess.cg else False
    cpu = (sess.cg.cpu_seconds() or 0) - (cpu0 or 0) if sess.cg else 0.0
    peak = sess.cg.peak_memory() if sess.cg else 0
    for f in (ctl / f"c.{n}", out_f, err_f):
        try:
            os.unlink(f)
        except OSError:
            pass
    error = ""
    if killed in ("timeout+shell", "output_limit+shell", "shell_exited"):
        why = "the shell exited (exit/exec in a step?)" if killed == "shell_exited" else "the command ran inside the shell and would not stop"
        sess.closed_reason = f"terminated: {why}"
        error = f"session terminated: {why}"
        sess._terminate()
        after = {}
    else:
        after = sess.ws.manifest()
        sess._last = after
    kind = (killed or "").split("+")[0]
    if kind == "timeout":
        status, error = "timeout", error or f"step timeout of {wall:.3g}s exceeded"
    elif kind == "output_limit":
        status = "output_limit"
    elif oom:
        status, error = "oom", error or f"memory limit of {lim_.memory_mb} MB exceeded"
    elif killed == "shell_exited":
        status = "nonzero_exit"
    else:
        status = "ok" if code == 0 else "nonzero_exit"
    sig = code - 128 if code is not None and 128 < code <= 192 else None
    return ExecResult(
        status=status, exit_code=None if sig else code, signal=sig, stdout=stdout, stderr=stderr,
        stdout_truncated=so_t, stderr_truncated=se_t, wall_s=wall_s, cpu_s=cpu, peak_memory_bytes=peak,
        files_changed=diff(before, after) if after or not killed else (), image_digest=sess.image.digest,
        limits=lim_, enforcement=sess.enforcement,
        error=error,
    )  # fmt: skip
