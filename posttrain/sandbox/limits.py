"""Validation of `ExecLimits` and the rlimit half of their enforcement.

Each limit is enforced by the strongest mechanism available, and the mechanism is
reported in `ExecResult.enforcement` (cgroup where the machine lets us create one,
rlimit otherwise; wall time by killing the pid namespace and the cgroup).
"""

from __future__ import annotations

import dataclasses
import math
import resource

from posttrain.errors import SandboxError
from posttrain.types import ExecLimits

MB = 1 << 20


def validate(limits: ExecLimits | None) -> ExecLimits:
    """Return usable limits or raise SandboxError naming the bad field."""
    if limits is None:
        return ExecLimits()
    if not isinstance(limits, ExecLimits):
        raise SandboxError(f"limits must be an ExecLimits, got {type(limits).__name__}")
    for f in dataclasses.fields(limits):
        v = getattr(limits, f.name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise SandboxError(f"limit {f.name}={v!r} must be a positive finite number")
    return limits


def rlimits(limits: ExecLimits, memory_by_cgroup: bool, pids_by_cgroup: bool) -> dict[int, int]:
    """rlimits applied to the sandbox's first process (and so inherited by all of it)."""
    cpu = max(1, math.ceil(limits.cpu_s))
    out = {
        resource.RLIMIT_CPU: cpu,
        resource.RLIMIT_FSIZE: int(limits.fsize_mb * MB),
        resource.RLIMIT_NOFILE: int(limits.nofile),
        resource.RLIMIT_CORE: 0,
    }
    if not memory_by_cgroup:
        # Address space is a blunt proxy for memory; generous headroom for the mapped runtime.
        out[resource.RLIMIT_AS] = int(limits.memory_mb * MB) + 64 * MB
    if not pids_by_cgroup:
        out[resource.RLIMIT_NPROC] = int(limits.pids)
    return out


_PRLIMIT_FLAGS = {
    resource.RLIMIT_CPU: "--cpu", resource.RLIMIT_FSIZE: "--fsize", resource.RLIMIT_NOFILE: "--nofile",
    resource.RLIMIT_CORE: "--core", resource.RLIMIT_AS: "--as", resource.RLIMIT_NPROC: "--nproc",
}  # fmt: skip


def prlimit_prefix(table: dict[int, int]) -> list[str]:
    """`prlimit --cpu=N:N … --` run inside the sandbox: lowering one's own limits needs no
    privilege, whereas setting another uid's limits from the host needs CAP_SYS_RESOURCE,
    which container roots often lack."""
    return ["/usr/bin/prlimit", *(f"{_PRLIMIT_FLAGS[k]}={v}:{v}" for k, v in table.items()), "--"]


def apply_prlimits(pid: int, table: dict[int, int]) -> None:
    """Lower the limits of another (blocked, not yet exec'd) process."""
    for res, val in table.items():
        resource.prlimit(pid, res, (val, val))


def enforcement(memory_by_cgroup: bool, pids_by_cgroup: bool, cgroup_kind: str, workspace: str) -> dict[str, str]:
    cg = f"cgroup-{cgroup_kind}"
    return {
        "wall_s": "kill pid-namespace" + (f" + {cg}" if cgroup_kind else ""),
        "cpu_s": "rlimit RLIMIT_CPU (per process)",
        "memory_mb": f"{cg} memory" if memory_by_cgroup else "rlimit RLIMIT_AS",
        "pids": f"{cg} pids" if pids_by_cgroup else "rlimit RLIMIT_NPROC (per host uid)",
        "fsize_mb": "rlimit RLIMIT_FSIZE",
        "nofile": "rlimit RLIMIT_NOFILE",
        "output_bytes": "host reader kills on overflow",
        "workspace_mb": workspace,
    }
