"""Host side of a warm slot: one zygote interpreter in its own bwrap and cgroup.

A slot runs one execution at a time. Before each, the host sets the slot cgroup's memory
limit to (current usage + the request's memory_mb) and its pids limit, resets the peak
counter, and passes the request's stdio pipes over the control socket (SCM_RIGHTS). The
zygote's processes have oom_score_adj -1000 and each execution raises its own to 1000,
so the kernel's OOM killer picks the program, never the zygote.

Contamination checks after every execution: the zygote answered in time, the cgroup
holds only the zygote's own processes again. Any doubt -> the slot is recycled.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Mapping, Sequence

from posttrain.sandbox import limits as lim
from posttrain.sandbox.bwrap import bwrap_argv, fixed_env
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.images import Image
from posttrain.sandbox.launch import launch
from posttrain.sandbox.result import Outcome, finish
from posttrain.sandbox.runtime import PY_INSIDE, sandbox_home
from posttrain.sandbox.seccomp import program
from posttrain.sandbox.streams import CappedReader, feed
from posttrain.sandbox.workspace import clean_relpath, diff
from posttrain.types import ExecLimits, ExecResult

HDR = struct.Struct("!II")
AGENT_INSIDE = "/opt/posttrain"
_ZYGOTE_PROCS = 3  # bwrap, bwrap's pid 1, the zygote interpreter
_SLACK_MB = 24  # page cache and per-execution helpers on top of the program's budget


def agent_dir() -> Path:
    """The agent scripts, copied where the unprivileged sandbox uid can bind them from."""
    src = Path(__file__).parent / "agent"
    d = sandbox_home() / "agent"
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o755)
    for f in src.glob("*.py"):
        dst = d / f.name
        text = f.read_bytes()
        if not dst.exists() or dst.read_bytes() != text:
            tmp = d / f".{f.name}.{os.getpid()}"
            tmp.write_bytes(text)
            os.chmod(tmp, 0o644)
            tmp.replace(dst)
    return d


async def _recv_msg(loop, sock: socket.socket) -> tuple[dict, bytes]:
    async def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = await loop.sock_recv(sock, n - len(buf))
            if not chunk:
                raise EOFError("zygote closed its control socket")
            buf += chunk
        return bytes(buf)

    jlen, plen = HDR.unpack(await exact(HDR.size))
    return json.loads(await exact(jlen)), (await exact(plen) if plen else b"")


def _send_msg(sock: socket.socket, obj: dict, payload: bytes = b"", fds: Sequence[int] = ()) -> None:
    blob = json.dumps(obj).encode()
    head = HDR.pack(len(blob), len(payload)) + blob
    sock.setblocking(True)
    try:
        socket.send_fds(sock, [head], list(fds)) if fds else sock.sendall(head)
        if payload:
            sock.sendall(payload)
    finally:
        sock.setblocking(False)


_LIVE: "set[Zygote]" = set()  # strong refs: an unclosed pool may be garbage before atexit runs


@atexit.register
def _cleanup_at_exit() -> None:
    """A pool nobody closed: its zygotes die with us (--die-with-parent); remove their cgroups."""
    for z in list(_LIVE):
        if z.launched is not None:
            try:
                z.launched.proc.kill()
                z.launched.proc.wait(timeout=2)
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass
        if z.cg is not None:
            z.cg.remove()
            z.cg = None


class Zygote:
    def __init__(self, image: Image, netns_per_exec: bool = False) -> None:
        self.image = image
        self.netns = netns_per_exec
        self.cg: Cgroup | None = None
        self.sock: socket.socket | None = None
        self.launched = None
        self.uses = 0
        self.dead = False
        self._ids = 0

    async def start(self, timeout_s: float = 20.0) -> None:
        self.cg = Cgroup.create(1 << 30, 64)
        _LIVE.add(self)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [f"{PY_INSIDE}/bin/python3", f"{AGENT_INSIDE}/zygote_main.py", str(theirs.fileno())]
        binds = (*self.image.binds(), "--ro-bind", str(agent_dir()), AGENT_INSIDE, "--cap-add", "CAP_SYS_ADMIN")
        devnull = os.open(os.devnull, os.O_RDWR)
        err = os.open(os.environ.get("POSTTRAIN_SANDBOX_ZYGOTE_LOG", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.launched = launch(
            lambda extra: bwrap_argv(cmd, None, fixed_env(self.image.pythonpath), binds, extra=extra),
            (devnull, os.dup(devnull), err), self.cg, None, pass_fds=(theirs.fileno(),), seccomp=False,
            oom_score_adj=-1000,
        )  # fmt: skip
        theirs.close()
        self.sock = mine
        mine.setblocking(False)
        _send_msg(mine, {"seccomp": program().hex()})
        msg, _ = await asyncio.wait_for(_recv_msg(asyncio.get_running_loop(), mine), timeout_s)
        if not msg.get("ready"):
            raise RuntimeError(f"zygote did not start: {msg}")

    def _prepare_cgroup(self, limits: ExecLimits) -> None:
        if self.cg is None:
            return
        usage = self.cg.usage()
        mem = usage + int((limits.memory_mb + _SLACK_MB) * lim.MB)
        self.cg.set_limits(mem, _ZYGOTE_PROCS + 2 + int(limits.pids))
        self._usage0 = usage

    async def exec(self, cmd, files: Mapping[str, bytes] | None, stdin: bytes, limits: ExecLimits, read_files: Sequence[str]) -> ExecResult:
        assert self.sock is not None
        self.uses += 1
        self._ids += 1
        names, blobs = [], []
        for name, data in (files or {}).items():
            blob = data.encode() if isinstance(data, str) else bytes(data)
            names.append([clean_relpath(name), len(blob)])
            blobs.append(blob)
        memory_by_cg = self.cg is not None
        rl = {k: v for k, v in _rlimit_names(lim.rlimits(limits, memory_by_cg, memory_by_cg)).items()}
        req = {
            "op": "exec", "id": self._ids, "argv": list(cmd), "files": names, "rlimits": rl,
            "wall_s": float(limits.wall_s), "ws_bytes": int(limits.workspace_mb * lim.MB),
            "tmp_bytes": int(limits.workspace_mb * lim.MB), "read_files": [clean_relpath(r) for r in read_files],
            "output_bytes": int(limits.output_bytes), "netns": self.netns,
        }  # fmt: skip
        self._prepare_cgroup(limits)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        t0 = time.perf_counter()
        try:
            _send_msg(self.sock, req, b"".join(blobs), (in_r, out_w, err_w))
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        out = Outcome()
        out.enforcement = lim.enforcement(memory_by_cg, memory_by_cg, self.cg.version if self.cg else "", "tmpfs size= (per execution)")
        out.enforcement = {**out.enforcement, "wall_s": "kill pid-namespace (zygote timer) + host backstop"}

        def kill(reason: str) -> None:
            if out.killed is None:
                out.killed = reason
            try:
                _send_msg(self.sock, {"op": "kill", "id": req["id"], "reason": reason})
            except OSError:
                pass

        cap = int(limits.output_bytes)
        so = CappedReader(out_r, cap, lambda: kill("output_limit"))
        se = CappedReader(err_r, cap, lambda: kill("output_limit"))
        stdin_task = asyncio.ensure_future(feed(in_w, stdin)) if stdin else None
        if stdin_task is None:
            os.close(in_w)
        loop = asyncio.get_running_loop()
        try:
            res, _ = await asyncio.wait_for(_recv_msg(loop, self.sock), float(limits.wall_s) + 5.0)
        except (asyncio.TimeoutError, EOFError, OSError, ValueError) as e:
            self.dead = True
            so.close(), se.close()
            return ExecResult(status="sandbox_error", limits=limits, image_digest=self.image.digest, error=f"warm slot failed: {type(e).__name__}: {e}")
        try:
            await asyncio.wait_for(asyncio.gather(so.done, se.done), 2.0)
        except asyncio.TimeoutError:
            self.dead = True  # something still holds the pipes: recycle
        so.close(), se.close()
        if stdin_task is not None:
            stdin_task.cancel()
        return self._result(res, out, so, se, limits, cmd, t0)

    def _result(self, res: dict, out: Outcome, so, se, limits, cmd, t0) -> ExecResult:
        status = res.get("status")
        if isinstance(status, int):
            out.exit_code = os.waitstatus_to_exitcode(status)
        elif res.get("init") is not None and os.WIFEXITED(int(res["init"])) and os.WEXITSTATUS(int(res["init"])) >= 120:
            out.error = "execution setup failed inside the warm sandbox"
        if res.get("killed") and out.killed is None:
            out.killed = str(res["killed"])
        if out.killed and out.exit_code is None:
            out.exit_code = -9  # the namespace's pid 1 was SIGKILLed
        out.wall_s = time.perf_counter() - t0
        out.cpu_s = float(res.get("cpu_s") or 0.0)
        peak = self.cg.peak_memory() - getattr(self, "_usage0", 0) if self.cg else 0
        out.peak = max(int(res.get("maxrss") or 0), peak)
        out.oom = self.cg.oom_since_reset() if self.cg else False
        before = {str(k): (int(v[0]), str(v[1])) for k, v in (res.get("before") or {}).items()}
        after = {str(k): (int(v[0]), str(v[1])) for k, v in (res.get("after") or {}).items()}
        files = {str(k): str(v) for k, v in (res.get("files") or {}).items()}
        if self.cg is not None and self.cg.count_procs() > _ZYGOTE_PROCS:
            self.dead = True  # a process outlived its execution: never reuse this slot
        r = finish(out, so, se, limits, self.image.digest, diff(before, after), files, cmd)
        if out.error and r.status == "nonzero_exit":
            r = type(r)(**{**r.__dict__, "status": "sandbox_error"})
        return r

    async def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.launched is not None:
            try:
                self.launched.proc.kill()
            except ProcessLookupError:
                pass
            self.launched.proc.wait()
        if self.cg is not None:
            self.cg.remove()
            self.cg = None
        _LIVE.discard(self)


def _rlimit_names(table: dict[int, int]) -> dict[str, int]:
    import resource

    names = {getattr(resource, n): n for n in dir(resource) if n.startswith("RLIMIT_")}
    return {names[k]: v for k, v in table.items()}
