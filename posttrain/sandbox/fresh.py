"""Fresh-process mode: one new bwrap sandbox per execution.

It is a zygote (`zygote.py`) started for exactly one execution (`once=True`): the same
agent code, the same per-execution namespaces and mounts as pooled mode, so both modes
give the program the same view and the same limits -- in particular /work, /tmp and
/dev/shm are one tmpfs of `workspace_mb` inside the execution's own mount namespace (its
pages are charged to the execution's memory cgroup; nothing lands on the host's disk or
the host's /dev/shm). The interpreter that runs the program in-process, for
`python3 FILE|-c SRC`, has never seen any other request.

Flow: new cgroup, bwrap blocked until it is inside (`launch.py`), hello, one prepared
execution, the request, the answer; then the sandbox exits and the cgroup is removed
after a kill sweep. The execution makes only its own pid and mount namespaces: the
network, IPC and uts namespaces bwrap made for this sandbox already serve no one else
(the zygote opens no socket and makes no IPC object), so a second set would only cost
time (about a network namespace's set-up and teardown per execution). Killing bwrap kills the sandbox's pid 1 (--die-with-parent), which
takes the whole pid namespace with it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from posttrain.sandbox.images import Image
from posttrain.sandbox.overload import CpuSample, Verdict, judge
from posttrain.sandbox.result import is_wall_timeout
from posttrain.sandbox.zygote import Zygote
from posttrain.types import ExecLimits, ExecResult


async def run_fresh(
    cmd: Sequence[str],
    files: Mapping[str, "str | bytes"] | None,
    stdin: bytes,
    limits: ExecLimits,
    image: Image,
    read_files: Sequence[str] = (),
) -> tuple[ExecResult, Verdict | None]:
    """The result, and for a wall timeout the starvation verdict from the CPU samples around it."""
    z = Zygote(image, once=True)
    try:
        await z.start()
        before = CpuSample.take(z.cg)
        res = await z.exec(cmd, files, stdin, limits, read_files)
        return res, (judge(before, CpuSample.take(z.cg)) if is_wall_timeout(res) else None)
    finally:
        await z.close()
