"""Turning what happened to a sandboxed process into an `ExecResult` with one status."""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass, field
from typing import Sequence

from posttrain.types import ExecLimits, ExecResult, FileChange


# How each launcher reports a failed execve of the requested command.
_EXEC_FAILED = ("bwrap: execvp", "prlimit: failed to execute", "posttrain-sandbox: execvp")


@dataclass
class Outcome:
    exit_code: int | None = None  # subprocess convention: negative = killed by that signal
    killed: str | None = None  # "timeout" | "output_limit" when we killed it
    oom: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak: int = 0
    enforcement: dict[str, str] = field(default_factory=dict)
    error: str = ""


WALL_TIMEOUT = "wall time limit of"  # how a wall-clock timeout's error begins (vs the CPU limit's)


def is_wall_timeout(r: ExecResult) -> bool:
    """Killed at its wall limit (not its CPU limit): the only timeout the host's load can cause."""
    return r.status == "timeout" and r.error.startswith(WALL_TIMEOUT)


def _split(code: int | None) -> tuple[int | None, int | None]:
    """(exit_code, signal). bwrap reports a signalled child as 128+N."""
    if code is None:
        return None, None
    if code < 0:
        return None, -code
    if 128 < code <= 128 + 64:
        return None, code - 128
    return code, None


def finish(out: Outcome, so, se, limits: ExecLimits, digest: str, changes: tuple[FileChange, ...], files: dict, cmd: Sequence[str]) -> ExecResult:
    exit_code, sig = _split(out.exit_code)
    stderr = se.text()
    error = out.error
    if out.killed == "output_limit":
        status = "output_limit"
    elif out.killed == "timeout":
        status = "timeout"
        error = error or f"{WALL_TIMEOUT} {limits.wall_s}s exceeded"
    elif out.oom:
        status = "oom"
        error = error or f"memory limit of {limits.memory_mb} MB exceeded"
    elif sig in (_signal.SIGXCPU, _signal.SIGKILL) and out.cpu_s >= limits.cpu_s * 0.9:
        status = "timeout"
        error = error or f"CPU time limit of {limits.cpu_s}s exceeded"
    elif exit_code == 0:
        status = "ok"
    else:
        status = "nonzero_exit"
        first = stderr.split("\n", 1)[0]
        if exit_code in (1, 126, 127) and first.startswith(_EXEC_FAILED):
            exit_code = 127
            error = f"command {cmd[0]!r} not found or not executable in the image ({first.rsplit(': ', 1)[-1]})"
        elif stderr.startswith("bwrap:") and not error:
            status = "sandbox_error"
            error = stderr.strip().splitlines()[0]
    return ExecResult(
        status=status,  # type: ignore[arg-type]
        exit_code=exit_code,
        signal=sig,
        stdout=so.text(),
        stderr=stderr,
        stdout_truncated=so.truncated,
        stderr_truncated=se.truncated,
        wall_s=out.wall_s,
        cpu_s=out.cpu_s,
        peak_memory_bytes=out.peak,
        files_changed=changes,
        image_digest=digest,
        limits=limits,
        enforcement=out.enforcement,
        files=files,
        error=error,
    )
