"""Persistent sandboxes for multi-step terminal tasks: one bwrap, one bash, many steps.

    async with pool.session("host", limits=ExecLimits(memory_mb=256), max_steps=50) as s:
        await s.write_file("data.txt", "3 1 2")
        r = await s.run("cd sub 2>/dev/null || mkdir sub && cd sub; export X=1")
        r = await s.run("pwd; echo $X")            # /work/sub, 1: cwd and env persist

Design: bash reads one line per step from a pipe: `. /.posttrain/c.N >/.posttrain/o.N
2>/.posttrain/e.N </dev/null; printf 'NONCE N %d\\n' $?`. The command is *sourced*, so
`cd` and `export` persist; its output goes to files the host reads with caps; the marker
line on the shell's own stdout ends the step. The workspace is a host tmpfs directory
bound at /work, so `read_file`, `write_file`, `snapshot` and `diff` are host-side and
never follow a symlink the program planted.

On a step timeout every process of the session except bash itself (and bwrap) is killed;
if bash does not answer within a moment (the command ran inside the shell, e.g. a
`while :; do :; done` loop, `exec`, or `exit`), the session is terminated and later
calls raise SandboxError. The step and time budgets raise `BudgetExceeded`.

Not covered: a step's program can forge its own step's result (it runs as the same uid as
bash and could read the nonce from the shell's memory); that only lies about itself.
"""

from __future__ import annotations

import asyncio
import os
import resource
import secrets
import time
from pathlib import Path

from posttrain.errors import SandboxError
import posttrain.sandbox.limits as lim
from posttrain.sandbox.bwrap import bwrap_argv, fixed_env, rootfs_argv, rootfs_env, run_as
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.images import Image
from posttrain.sandbox.launch import Launched, launch
from posttrain.sandbox.runtime import workspace_root
from posttrain.sandbox.workspace import Manifest, Workspace, copy_tree_into, diff
from posttrain.types import ExecLimits, ExecResult, FileChange

CTL_INSIDE = "/.posttrain"


class BudgetExceeded(SandboxError):
    """A session used up its step or time budget."""


class ShellSession:
    def __init__(self, image: Image, limits: ExecLimits, max_steps: int = 1000, time_budget_s: float = 3600.0,
                 workspace_from: "os.PathLike | None" = None, extra_binds: tuple[str, ...] = ()) -> None:
        """`workspace_from` (rootfs images): the tree the workspace starts as, instead of the image's WORKDIR;
        `extra_binds`: more bwrap bind arguments (the test phase's read-only /tests)."""
        self.workspace_from, self.extra_binds = workspace_from, tuple(extra_binds)
        if max_steps <= 0 or time_budget_s <= 0:
            raise SandboxError(f"session budgets must be positive (max_steps={max_steps}, time_budget_s={time_budget_s})")
        self.image, self.limits = image, limits
        self.max_steps, self.time_budget_s = max_steps, time_budget_s
        self.steps = 0
        self.closed_reason = ""
        self._nonce = secrets.token_hex(16)
        self._lock = asyncio.Lock()
        self._pending = b""
        self._snapshot: Manifest = {}
        self._last: Manifest = {}
        # What start() has made so far; close() (or a failed start) undoes exactly that.
        self.ws: Workspace | None = None
        self.ctl: Workspace | None = None
        self.cg: Cgroup | None = None
        self.launched: Launched | None = None
        self._in = self._out = -1
        self._hold = -1  # a rootfs image's shared lock (rootfs_store.hold), released on close

    # ---- lifecycle -------------------------------------------------------------------
    async def start(self) -> "ShellSession":
        return self.start_blocking()

    def start_blocking(self) -> "ShellSession":
        """The start itself (workspace, cgroup, bwrap); a warm pool runs it off the event loop. If any
        part fails, remove what was made and raise."""
        try:
            return self._start()
        except BaseException:
            self.closed_reason = "closed"  # a session that never started is closed, not half-open
            self._terminate()
            raise

    def _start(self) -> "ShellSession":
        uid = run_as()
        root = workspace_root()
        self.ws = Workspace.create(root, uid)
        if self.image.rootfs is not None:  # the workspace starts as the image's WORKDIR (or the tree given)
            copy_tree_into(Path(self.workspace_from or self.image.rootfs.workdir_tree), self.ws.path)
        self.ctl = Workspace.create(root, uid)
        self.cg = Cgroup.create(int(self.limits.memory_mb * lim.MB), int(self.limits.pids) + 3)
        table = lim.rlimits(self.limits, self.cg is not None, self.cg is not None)
        table.pop(resource.RLIMIT_CPU)  # a per-shell CPU budget would end the session, not the step
        cmd = [*lim.prlimit_prefix(table), "/bin/bash", "--norc", "--noprofile"]
        root = self.image.rootfs
        if root is not None:  # a Debian-rootfs image: a throwaway overlay of it, the workspace at its WORKDIR
            from posttrain.sandbox.rootfs_store import hold

            self._hold = hold(root.manifest)  # `sandbox image gc` leaves the image alone until close
            binds: tuple[str, ...] = ("--bind", str(self.ctl.path), CTL_INSIDE, *self.extra_binds)
            argv_for = lambda extra: rootfs_argv(cmd, root, self.ws.path, rootfs_env(root), binds, extra)  # noqa: E731
        else:
            binds = (*self.image.binds(), "--bind", str(self.ctl.path), CTL_INSIDE)
            argv_for = lambda extra: bwrap_argv(cmd, self.ws.path, fixed_env(self.image.pythonpath), binds, extra=extra)  # noqa: E731
        in_r, self._in = os.pipe2(os.O_CLOEXEC)
        self._out, out_w = os.pipe2(os.O_CLOEXEC)
        devnull = os.open(os.devnull, os.O_WRONLY)  # launch() closes in_r, out_w and devnull, even on failure
        self.launched = launch(argv_for, (in_r, out_w, devnull), self.cg, None)
        os.set_blocking(self._out, False)
        self.started = time.monotonic()
        self.enforcement = {
            **lim.enforcement(self.cg is not None, self.cg is not None, self.cg.version if self.cg else "", "memory cgroup (tmpfs pages) + RLIMIT_FSIZE"),
            "wall_s": "kill the step's processes (cgroup sweep); the whole session if bash itself hangs",
            "cpu_s": "not enforced per step (the step timeout bounds it); measured by cgroup cpuacct",
        }
        return self

    async def close(self) -> None:
        if self.closed_reason == "closed":
            return
        self.closed_reason = self.closed_reason or "closed"
        self._terminate()
        self.closed_reason = "closed"

    def _terminate(self) -> None:
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass
        self._in = self._out = -1
        if self.launched is not None:
            try:
                self.launched.proc.kill()
            except ProcessLookupError:
                pass
            self.launched.proc.wait()
        if self.cg is not None:
            self.cg.remove()
            self.cg = None
        for ws in (self.ws, self.ctl):
            if ws is not None:
                ws.remove()
        if self._hold >= 0:  # the processes on the image are gone: gc may take it now
            os.close(self._hold)
            self._hold = -1

    async def __aenter__(self) -> "ShellSession":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self.closed_reason:
            raise SandboxError(f"session is closed ({self.closed_reason})")

    @property
    def workspace_dir(self) -> Path:
        """The host directory bound at the workspace (what a test phase copies from)."""
        self._check_open()
        return self.ws.path

    # ---- files -------------------------------------------------------------------------
    async def read_file(self, path: str) -> bytes:
        self._check_open()
        return self.ws.read(path)

    async def write_file(self, path: str, data: str | bytes) -> None:
        self._check_open()
        self.ws.write(path, data.encode() if isinstance(data, str) else bytes(data))

    async def snapshot(self) -> dict[str, str]:
        self._check_open()
        self._snapshot = self.ws.manifest()
        return {p: sha for p, (_size, sha) in self._snapshot.items()}

    async def diff(self) -> list[FileChange]:
        self._check_open()
        return list(diff(self._snapshot, self.ws.manifest()))

    # ---- steps -------------------------------------------------------------------------
    async def run(self, cmd: str, timeout: float | None = None) -> ExecResult:
        self._check_open()
        if not isinstance(cmd, str):
            raise SandboxError(f"session command must be a string, got {type(cmd).__name__}")
        if self.steps >= self.max_steps:
            raise BudgetExceeded(f"session step budget of {self.max_steps} steps is used up")
        left = self.time_budget_s - (time.monotonic() - self.started)
        if left <= 0:
            raise BudgetExceeded(f"session time budget of {self.time_budget_s}s is used up")
        wall = min(float(timeout if timeout is not None else self.limits.wall_s), left)
        if wall <= 0:
            raise SandboxError(f"timeout={timeout!r} must be positive")
        async with self._lock:
            self.steps += 1
            return await self._step(cmd, wall)

    async def _step(self, cmd: str, wall: float) -> ExecResult:
        from posttrain.sandbox.session_step import run_step

        return await run_step(self, cmd, wall)
