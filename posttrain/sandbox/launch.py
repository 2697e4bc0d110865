"""Starting a bwrap sandbox that is already inside its cgroup and rlimits when it runs.

bwrap is started with --block-fd (the sandbox waits before exec) and --info-fd (it
tells us the host pid of its pid 1). We then move bwrap and that pid into the cgroup,
lower rlimits and, for long-lived helpers, pin the OOM score, and only then release
it; every process the program ever forks is born inside the cgroup.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Sequence

import posttrain.sandbox.limits as lim
from posttrain.sandbox.bwrap import run_as
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.seccomp import seccomp_fd


@dataclass
class Launched:
    proc: subprocess.Popen
    child_pid: int  # host pid of the sandbox's pid 1 (0 if bwrap failed early)


def _read_info(fd: int) -> dict:
    data = b""
    while not data.rstrip().endswith(b"}"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return json.loads(data) if data.strip() else {}


def launch(
    argv_for: "callable",
    stdio: tuple[int, int, int],
    cg: Cgroup | None,
    rlimits: dict[int, int] | None,
    pass_fds: Sequence[int] = (),
    seccomp: bool = True,
    oom_score_adj: int | None = None,
) -> Launched:
    """`argv_for(extra_args)` builds the bwrap argv; stdio fds are closed here after the spawn."""
    info_r, info_w = os.pipe2(os.O_CLOEXEC)
    block_r, block_w = os.pipe2(os.O_CLOEXEC)
    fds = [info_w, block_r]
    extra = ["--info-fd", str(info_w), "--block-fd", str(block_r)]
    if seccomp:
        sfd = seccomp_fd()
        fds.append(sfd)
        extra += ["--seccomp", str(sfd)]
    uid = run_as()
    try:
        proc = subprocess.Popen(
            argv_for(extra), stdin=stdio[0], stdout=stdio[1], stderr=stdio[2], pass_fds=(*fds, *pass_fds),
            user=uid, group=uid, extra_groups=[] if uid is not None else None,
            env={},  # bwrap's own pid 1 is visible inside: its /proc/1/environ must hold nothing
        )  # fmt: skip
    finally:
        for fd in (*fds, *stdio):
            if fd > 2:
                os.close(fd)
    try:
        child = int(_read_info(info_r).get("child-pid", 0))
        for pid in (proc.pid, child):
            if not pid:
                continue
            if cg is not None:
                cg.add(pid)
            if oom_score_adj is not None:
                _write_oom_adj(pid, oom_score_adj)
        if child and rlimits:
            try:
                lim.apply_prlimits(child, rlimits)
            except OSError:
                pass  # it already died (bad argv); bwrap says why on stderr
        os.write(block_w, b"1")
    finally:
        os.close(block_w)
    return Launched(proc, child)


def _write_oom_adj(pid: int, value: int) -> None:
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass
