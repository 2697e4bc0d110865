"""Host side of a warm slot: one zygote interpreter in its own bwrap and cgroup.

The zygote keeps one execution prepared before any request exists -- its pid 1 (C2) in
fresh namespaces, and the program's process (C3) forked by C2, privileges already
dropped -- and hands us one end of a socket to C2 ({"op": "ready"} + fd on the control
socket). `exec` sends the request, its files and its stdio pipes (SCM_RIGHTS) to that C2
directly (C2 tells the zygote, which prepares the next execution while this one runs;
C2 hands C3 its argv and stdio) and reads the answer from C2. The zygote reports each reaped C2 ("exited"). The
next `exec` waits for that report unless the last C2 answered (it has then killed and
reaped its whole namespace itself) and the slot's unreclaimable memory is already back
near its baseline: either way the previous execution's pages are gone before the next
limit is set, and that C2's exit overlaps the next execution instead of delaying it.
See agent/zygote_main.py and agent/execution.py for what each execution gets fresh.

Memory: the slot cgroup's limit is (baseline + the request's memory_mb + slack), where
the baseline is the usage measured once when the slot started, never the current usage,
so nothing an execution leaves behind can raise a later one's limit. The zygote's
processes have oom_score_adj -1000 and each program raises its own to 1000, so the
kernel's OOM killer picks the program, never the zygote.

Contamination checks before the next execution: C2 answered in time, the cgroup holds
only the zygote, the prepared execution (C2 and C3) and at most the last C2 still exiting, and the
slot's unreclaimable memory (anon + shmem) is back near its baseline. Any doubt -> the
slot is recycled (and the request re-run).

`once=True` is fresh mode: the same sandbox for exactly one execution, then it exits.
"""
from __future__ import annotations

import asyncio
import atexit
import errno
import os
import socket
import time
from functools import lru_cache
from typing import Mapping, Sequence

import posttrain.sandbox.limits as lim
from posttrain.sandbox.agent_files import agent_dir
from posttrain.sandbox.bwrap import bwrap_argv, fixed_env
from posttrain.sandbox.cgroups import Cgroup
from posttrain.sandbox.framing import Framed, send_msg
from posttrain.sandbox.images import Image
from posttrain.sandbox.launch import launch
from posttrain.sandbox.result import Outcome, finish
from posttrain.sandbox.runtime import PY_INSIDE
from posttrain.sandbox.seccomp import program
from posttrain.sandbox.streams import CappedReader, feed
from posttrain.sandbox.workspace import clean_relpath, diff
from posttrain.types import ExecLimits, ExecResult

AGENT_INSIDE = "/opt/posttrain"
_ZYGOTE_PROCS = 3  # bwrap, bwrap's pid 1, the zygote interpreter
_PREPARED_PROCS = 2  # a prepared execution: its C2 (pid 1) and the program's process (C3), both made before the request
_SLACK_MB = 24  # page cache and per-execution helpers on top of the program's budget
_DRIFT_MB = 32  # unreclaimable memory above the baseline after an execution -> recycle the slot
_OVERLAP_MB = 8  # at most this much above the baseline: the next execution need not wait for the last C2's exit
_KILL_GRACE_S = 1.0  # C2 enforces wall_s itself; the zygote kills C2 this much later
WORKSPACE_ENFORCEMENT = "tmpfs size= in the execution's mount namespace (/work, /tmp, /dev/shm share the cap)"


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
    def __init__(self, image: Image, once: bool = False) -> None:
        self.image = image
        self.once = once
        self.cg: Cgroup | None = None
        self.sock: socket.socket | None = None
        self.launched = None
        self.uses = 0
        self.dead = False
        self._ready: list[tuple[int, socket.socket]] = []  # prepared C2s (seq, our end of its socket), oldest first
        self._exited: dict[int, int] = {}  # seq -> wait status of C2s the zygote has reaped
        self._ended = False  # the zygote said it exits (fresh mode) or closed its socket
        self._exiting: dict[int, bool] = {}  # seq -> its C2 answered, for executions whose exit is not yet reported
        self._baseline = 0  # cgroup usage with the zygote idle and one execution prepared
        self._pinned0 = 0  # its anon + shmem part
        self._ctrl: Framed | None = None
        self._enforcement: dict[str, str] = {}

    async def start(self, timeout_s: float = 20.0) -> None:
        self.cg = Cgroup.create(1 << 30, 64)
        _LIVE.add(self)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [f"{PY_INSIDE}/bin/python3", f"{AGENT_INSIDE}/zygote_main.py", str(theirs.fileno()), *(["--once"] if self.once else [])]
        binds = (*self.image.binds(), "--ro-bind", str(agent_dir()), AGENT_INSIDE, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN")
        devnull = os.open(os.devnull, os.O_RDWR)
        err = os.open(os.environ.get("POSTTRAIN_SANDBOX_ZYGOTE_LOG", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.launched = launch(
            lambda extra: bwrap_argv(cmd, None, fixed_env(self.image.pythonpath), binds, extra=extra, read_only_dev=True),
            (devnull, os.dup(devnull), err), self.cg, None, pass_fds=(theirs.fileno(),), seccomp=False,
            oom_score_adj=-1000,
        )  # fmt: skip
        theirs.close()
        self.sock = mine
        self._ctrl = Framed(mine)
        mine.setblocking(False)
        send_msg(mine, {"seccomp": program().hex()})
        while not self._ready and not self._ended:
            await self._read_one(timeout_s)
        if not self._ready:
            raise RuntimeError("zygote did not prepare an execution")
        if self.cg is not None:
            self._baseline, self._pinned0 = self.cg.usage(), self.cg.pinned_bytes()

    def _handle(self, msg: dict) -> None:
        assert self._ctrl is not None
        op = msg.get("op")
        if op == "ready" and self._ctrl.fds:  # its fd rode on this message: the oldest unclaimed one
            self._ready.append((int(msg["seq"]), socket.socket(fileno=self._ctrl.fds.pop(0))))
        elif op == "exited":
            seq = int(msg["seq"])
            self._exited[seq] = int(msg["init"])
            for item in [r for r in self._ready if r[0] == seq]:  # it died unused (killed from outside)
                self._ready.remove(item)
                item[1].close()
        elif op == "exit":
            self._ended = True
        else:
            raise RuntimeError(f"zygote said {msg!r}")
        if not self._ctrl.buf:  # no message left to claim them: fds on any other message are not ours to keep
            self._ctrl.close_fds()

    def _ended_now(self) -> BrokenPipeError:
        self._ended = self.dead = True
        return BrokenPipeError(errno.EPIPE, "the zygote is gone (its control socket is closed)")

    def _pump(self) -> None:
        """Handle every zygote message already sent, without waiting."""
        if self._ctrl is None or self.sock is None or self.sock.fileno() < 0:
            return
        while True:
            got = self._ctrl.next()
            if got is not None:
                self._handle(got[0])
            elif self._ctrl.eof:
                raise self._ended_now()
            elif not self._ctrl.fill():
                return

    async def _read_one(self, timeout_s: float) -> None:
        """Read one zygote message: a prepared execution ("ready"), a reaped one ("exited"), the end."""
        assert self._ctrl is not None
        try:
            msg, _ = await self._ctrl.get(asyncio.get_running_loop(), timeout_s)
        except EOFError:
            raise self._ended_now() from None
        self._handle(msg)

    async def _settle(self) -> None:
        """Before an execution: the slot is clean and a prepared C2 is at hand.

        An execution whose C2 answered has killed and reaped every process of its pid
        namespace itself, so only that C2 may still be exiting. The next execution may
        start meanwhile (its own fresh namespaces; no process of the old one can reach it)
        when the slot's unreclaimable memory is already back near its baseline, so the
        pages still being freed cannot squeeze the next limit. Otherwise (no answer, memory
        still held, or an older exit not yet reported) wait for the exit report first."""
        self._pump()
        self._forget_exited()
        while self._exiting and (len(self._exiting) > 1 or not all(self._exiting.values()) or not self._near_baseline()):
            await self._read_one(5.0)
            self._forget_exited()
        self._check_clean()
        if self.dead:
            raise RuntimeError("warm slot contaminated by its previous execution (a leftover process or pinned memory)")
        while not self._ready and not self._ended:
            await self._read_one(5.0)

    def _forget_exited(self) -> None:  # the rest of _exited: prepared C2s that died unused
        self._exiting = {s: a for s, a in self._exiting.items() if s not in self._exited}
        self._exited.clear()

    def _near_baseline(self) -> bool:
        """The slot's memory is within _OVERLAP_MB of its baseline (page cache aside)."""
        if self.cg is None:
            return False  # no cgroup to measure: always wait for the exit
        if self.cg.usage() - self._baseline <= _OVERLAP_MB * lim.MB:
            return True
        return self.cg.pinned_bytes() - self._pinned0 <= _OVERLAP_MB * lim.MB

    def _prepare_cgroup(self, limits: ExecLimits) -> None:
        if self.cg is None:
            return
        mem = self._baseline + int((limits.memory_mb + _SLACK_MB) * lim.MB)
        # + the next execution being prepared meanwhile, + the last one's C2 still exiting
        self.cg.set_limits(mem, _ZYGOTE_PROCS + _PREPARED_PROCS + 2 + int(limits.pids))

    async def exec(self, cmd, files: Mapping[str, bytes] | None, stdin: bytes, limits: ExecLimits, read_files: Sequence[str]) -> ExecResult:
        assert self.sock is not None
        names, blobs = [], []  # a bad path raises SandboxError here, before the slot is touched
        for name, data in (files or {}).items():
            blob = data.encode() if isinstance(data, str) else bytes(data)
            names.append([clean_relpath(name), len(blob)])
            blobs.append(blob)
        read_rel = [clean_relpath(r) for r in read_files]
        await self._settle()
        if not self._ready:
            self.dead = True
            raise RuntimeError("the zygote has no prepared execution")
        seq, conn = self._ready.pop(0)
        self.uses += 1
        memory_by_cg = self.cg is not None
        rl_names = _rlimit_names()
        rl = {rl_names[k]: v for k, v in lim.rlimits(limits, memory_by_cg, memory_by_cg).items()}
        req = {
            "op": "exec", "id": seq, "argv": list(cmd), "files": names, "rlimits": rl,
            "wall_s": float(limits.wall_s), "ws_bytes": int(limits.workspace_mb * lim.MB),
            "read_files": read_rel, "output_bytes": int(limits.output_bytes),
        }  # fmt: skip
        self._prepare_cgroup(limits)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        for fd in (in_r, out_w, err_w):  # a pipe belongs to our uid: let the program reopen /dev/stdin, /dev/stdout
            os.fchmod(fd, 0o666)
        t0 = time.perf_counter()
        try:
            send_msg(conn, req, b"".join(blobs), (in_r, out_w, err_w))
        except OSError:
            self.dead = True  # the prepared execution is gone (BrokenPipeError): never hand this slot out again
            os.close(in_w), os.close(out_r), os.close(err_r)
            conn.close()
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        out = Outcome()
        if not self._enforcement:
            self._enforcement = {
                **lim.enforcement(memory_by_cg, memory_by_cg, self.cg.version if self.cg else "", WORKSPACE_ENFORCEMENT),
                "wall_s": "kill pid-namespace (its pid 1's timer) + zygote kill + host backstop",
            }
        out.enforcement = dict(self._enforcement)

        def kill(reason: str) -> None:
            if out.killed is None:
                out.killed = reason
            try:
                send_msg(self.sock, {"op": "kill", "seq": seq, "reason": reason})
            except OSError:
                pass

        cap = int(limits.output_bytes)
        so = CappedReader(out_r, cap, lambda: kill("output_limit"))
        se = CappedReader(err_r, cap, lambda: kill("output_limit"))
        stdin_task = asyncio.ensure_future(feed(in_w, stdin)) if stdin else None
        if stdin_task is None:
            os.close(in_w)
        loop = asyncio.get_running_loop()
        backstop = loop.call_later(float(limits.wall_s) + _KILL_GRACE_S, kill, "timeout")
        res: dict = {}
        answer = Framed(conn)
        try:
            res, _ = await answer.get(loop, float(limits.wall_s) + 5.0)
        except EOFError:
            pass  # C2 was killed (output limit, backstop) or its setup failed: no answer
        except (asyncio.TimeoutError, OSError, ValueError) as e:
            self.dead = True
            so.close(), se.close()
            return ExecResult(status="sandbox_error", limits=limits, image_digest=self.image.digest, error=f"warm slot failed: {type(e).__name__}: {e}")
        finally:
            backstop.cancel()
            answer.close_fds()  # an answer carries none
            conn.close()
        try:
            if not (so.done.done() and se.done.done()):  # usually read to their end already
                await asyncio.wait_for(asyncio.gather(so.done, se.done), 2.0)
        except asyncio.TimeoutError:
            self.dead = True  # something still holds the pipes: recycle
        so.close(), se.close()
        if stdin_task is not None:
            stdin_task.cancel()
        if not res and out.killed is None:  # no answer: how did its pid 1 end, or is the zygote gone?
            self.dead = True
            try:
                while seq not in self._exited:
                    await self._read_one(5.0)
                out.error = f"execution setup failed inside the warm sandbox (pid 1 wait status {self._exited[seq]})"
            except (asyncio.TimeoutError, OSError, ValueError, RuntimeError) as e:
                out.error = f"warm slot failed: the zygote died during the execution ({type(e).__name__}: {e})"
        self._exiting[seq] = bool(res) and out.killed is None  # it answered: nothing of it runs any more
        return self._result(res, out, so, se, limits, cmd, t0)

    def _check_clean(self) -> None:
        """Between executions: only the zygote (+ the prepared C2, + an answered C2 still
        exiting) and about its baseline memory."""
        if self.cg is None:
            return
        if self.cg.count_procs() > _ZYGOTE_PROCS + _PREPARED_PROCS + len(self._exiting):
            self.dead = True  # a process outlived its execution: never reuse this slot
        if self.cg.usage() - self._baseline > _DRIFT_MB * lim.MB and self.cg.pinned_bytes() - self._pinned0 > _DRIFT_MB * lim.MB:
            self.dead = True  # memory an execution left behind (e.g. tmpfs pages held by a leaked fd)

    def _result(self, res: dict, out: Outcome, so, se, limits, cmd, t0) -> ExecResult:
        status = res.get("status")
        if isinstance(status, int):
            out.exit_code = os.waitstatus_to_exitcode(status)
        if res.get("killed") and out.killed is None:
            out.killed = str(res["killed"])
        if out.killed and out.exit_code is None:
            out.exit_code = -9  # the namespace's processes were SIGKILLed
        out.wall_s = time.perf_counter() - t0
        out.cpu_s = float(res.get("cpu_s") or 0.0)
        peak = self.cg.peak_memory() - self._baseline if self.cg else 0
        out.peak = max(int(res.get("maxrss") or 0), peak)
        out.oom = self.cg.oom_since_reset() if self.cg else False
        before = {str(k): (int(v[0]), str(v[1])) for k, v in (res.get("before") or {}).items()}
        after = {str(k): (int(v[0]), str(v[1])) for k, v in (res.get("after") or {}).items()}
        files = {str(k): str(v) for k, v in (res.get("files") or {}).items()}
        r = finish(out, so, se, limits, self.image.digest, diff(before, after), files, cmd)
        if out.error and r.status == "nonzero_exit":
            r = type(r)(**{**r.__dict__, "status": "sandbox_error"})
        return r

    async def close(self) -> None:
        for _seq, conn in self._ready:
            conn.close()
        self._ready.clear()
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


@lru_cache(maxsize=1)
def _rlimit_names() -> dict[int, str]:
    import resource

    return {getattr(resource, n): n for n in dir(resource) if n.startswith("RLIMIT_")}
