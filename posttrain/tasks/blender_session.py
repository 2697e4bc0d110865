"""`BlenderSession`: one sandboxed bpy process per episode, spoken to in JSON lines.

    with BlenderSession() as s:            # starts bwrap + python + `import bpy` (about 1-2 s)
        s.call("add_primitive", {"name": "box", "shape": "cube"})   # -> "added cube 'box'" (ms)
        s.call("save", {})                 # /work/scene.blend inside == s.workspace / "scene.blend"

The process runs `blender_worker.py` under bubblewrap with the same namespaces as every
sandbox (`--unshare-all`: no network but `lo`, own pid/ipc/uts), the project's clean
CPython at /opt/python, bpy's site-packages read-only at /opt/bpy, a private workspace at
/work (the only writable place besides a small /tmp), seccomp, and its own memory cgroup
(`memory_mb`, swap 0; `peak_memory_bytes()` reads its high-water mark) when the machine
has cgroups. `call` raises `BlenderRefused` for a request the scene refuses (the model's
mistake, shown as the observation) and `BlenderDown` when the process died or timed out
(an infrastructure error). Closing kills the process group and removes the workspace; a
session that is only dropped is closed by its finalizer, and the worker exits on its own
after 10 idle minutes or when our end of its stdin closes.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import subprocess
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from posttrain.sandbox.bwrap import bwrap_argv, fixed_env, run_as
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.launch import launch
from posttrain.sandbox.limits import prlimit_prefix
from posttrain.sandbox.runtime import workspace_root
from posttrain.tasks.blender_runtime import INSIDE, require_runtime

WORKER = Path(__file__).with_name("blender_worker.py")
# bwrap runs with --die-with-parent, whose signal fires when the spawning THREAD exits; tools run
# in short-lived threads, so every session is spawned from this one long-lived thread instead.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pt-blender-spawn")
START_TIMEOUT_S = 60.0


class BlenderRefused(Exception):
    """The scene refused the request (unknown object, name taken...): the model's doing."""


class BlenderDown(Exception):
    """The Blender process died, timed out or never started: not the model's doing."""


def _kill(proc: subprocess.Popen, cg: Cgroup | None, workspace: Path, log: Path) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            f.close()
    if cg is not None:
        cg.remove()
    shutil.rmtree(workspace, ignore_errors=True)
    log.unlink(missing_ok=True)


class BlenderSession:
    def __init__(self, memory_mb: int = 2048, call_timeout_s: float = 30.0) -> None:
        site = require_runtime()
        self.call_timeout_s = call_timeout_s
        self.workspace = Path(tempfile.mkdtemp(prefix="blender-", dir=workspace_root()))
        uid = run_as()
        if uid is not None:
            os.chown(self.workspace, uid, uid)
        os.chmod(self.workspace, 0o700)
        binds = ["--ro-bind", str(site), INSIDE, "--ro-bind", str(WORKER), "/opt/worker.py"]
        env = {**fixed_env(INSIDE), "PYTHONPATH": INSIDE}
        self.cgroup = Cgroup.create(memory_mb << 20, 256)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        self._log = self.workspace.parent / f"{self.workspace.name}.log"
        err = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        # no cgroup here: cap the address space instead, set by prlimit inside the sandbox (lowering
        # one's own limit needs no privilege; setting another uid's from the host needs CAP_SYS_RESOURCE)
        cap = [] if self.cgroup is not None else prlimit_prefix({resource.RLIMIT_AS: max(memory_mb, 1536) << 20})
        argv = lambda extra: bwrap_argv([*cap, "/opt/python/bin/python3", "-s", "/opt/worker.py"], self.workspace, env,
                                        image_binds=binds, tmp_bytes=256 << 20, extra=extra)  # noqa: E731
        try:
            launched = _SPAWNER.submit(launch, argv, (in_r, out_w, err), self.cgroup, None).result()
        except OSError as e:  # bwrap died before it could be released (a bind that failed, no resources)
            for fd in (in_w, out_r):
                os.close(fd)
            if self.cgroup is not None:
                self.cgroup.remove()
            shutil.rmtree(self.workspace, ignore_errors=True)
            tail = self._log_tail()
            self._log.unlink(missing_ok=True)
            raise BlenderDown(f"Blender sandbox did not start: {e}: {tail}") from None
        self.proc, self.sandbox_pid = launched.proc, launched.child_pid  # sandbox_pid: its pid 1, in its namespaces
        self.proc.stdin = os.fdopen(in_w, "w", buffering=1)
        self.proc.stdout = os.fdopen(out_r, "r")
        self._finalizer = weakref.finalize(self, _kill, self.proc, self.cgroup, self.workspace, self._log)
        self.calls = 0
        ready = self._read(START_TIMEOUT_S)
        self.version = ready["result"]["ready"]

    def _log_tail(self) -> str:
        return self._log.read_text(errors="replace")[-600:].strip() if self._log.exists() else ""

    def _read(self, timeout_s: float) -> dict[str, Any]:
        out = self.proc.stdout
        ready, _, _ = select.select([out], [], [], timeout_s)
        line = out.readline() if ready else ""
        if not line:
            why = "timed out" if not ready else f"exited with {self.proc.poll()}"
            tail = self._log_tail()
            self.close()
            raise BlenderDown(f"Blender session {why}: {tail}")
        return json.loads(line)

    def call(self, op: str, args: dict[str, Any] | None = None, timeout_s: float | None = None) -> Any:
        if not self._finalizer.alive:
            raise BlenderDown("Blender session is closed")
        try:
            self.proc.stdin.write(json.dumps({"op": op, "args": args or {}}) + "\n")
        except (BrokenPipeError, ValueError) as e:
            self.close()
            raise BlenderDown(f"Blender session died: {e}") from e
        reply = self._read(timeout_s or self.call_timeout_s)
        self.calls += 1
        if not reply["ok"]:
            raise BlenderRefused(reply["error"])
        return reply["result"]

    def peak_memory_bytes(self) -> int:
        """The cgroup's high-water mark, else the worker's own max RSS."""
        peak = self.cgroup.peak_memory() if self.cgroup is not None else 0
        return peak or int(self.call("stats")["max_rss_bytes"])

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> "BlenderSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def inspect_blend(data: bytes, memory_mb: int = 2048) -> dict[str, Any]:
    """Open `.blend` bytes in a fresh sandboxed Blender and report objects, geometry, materials."""
    with BlenderSession(memory_mb=memory_mb) as s:
        path = s.workspace / "inspect.blend"
        path.write_bytes(data)
        uid = run_as()
        if uid is not None:
            os.chown(path, uid, uid)
        t0 = time.perf_counter()
        report = s.call("inspect", {"path": "/work/inspect.blend"}, timeout_s=120.0)
        report["inspect_s"] = time.perf_counter() - t0
        return report
