"""The real `posttrain` command in a fresh process, forked from a warm one instead of started cold.

    from posttrain.testing.cli_fork import run_cli
    r = run_cli(["rl", "examples/tiny_rl.yaml", "rl.loss=ppo"], cwd=ROOT, timeout=60)
    r.returncode, r.stdout, r.stderr           # as subprocess.run(..., capture_output=True, text=True)

Why: a cold `python -m posttrain.cli.main` spends about 2 s of CPU importing torch and the
built-ins before it reads its first argument. The suite runs the CLI a few hundred times, most
of them to check a one-line refusal, so on a 2-core machine those imports were a fifth of
`make test`. Here one server process per test process (the zygote) imports them once; each call
forks it. The child is a new process with its own pid, its own file descriptors 0/1/2 (the
caller's pipes, passed over a Unix socket), the caller's cwd, environment and argv, and it runs
`posttrain.cli.main.main()`, the console script's entry, to its exit status. What differs from a
cold start is only what the imports left behind, which is nothing a command reads: the zygote runs
no command and touches no file. Forking after `import torch` (no op run, so no thread pools) is what
torch's own DataLoader workers do.

A command that re-executes itself (trainer.world_size > 1 starts its ranks with sys.executable)
works unchanged. Tests that signal a running command (Ctrl-C and --resume) start it cold with
subprocess.Popen: they need a handle while it runs, and the start is a small part of them.

Limits: Linux (fork and SCM_RIGHTS); elsewhere `run_cli` starts the command cold. Variables read
only at import (PYTHONPATH, PYTHONHASHSEED) are the zygote's, not the call's: pass such a call
`cold=True`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

CLI = [sys.executable, "-m", "posttrain.cli.main"]


def run_cli(argv: Sequence[str], cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 120, input: str | None = None, cold: bool = False) -> subprocess.CompletedProcess:
    """`posttrain ARGV` to its end: (returncode, stdout, stderr) as text. `timeout` kills it and raises
    subprocess.TimeoutExpired, like subprocess.run."""
    if cold or input is not None or not hasattr(socket, "send_fds") or sys.platform != "linux":
        return subprocess.run(CLI + list(argv), cwd=cwd, env=None if env is None else dict(env), input=input,
                              capture_output=True, text=True, timeout=timeout)
    return _zygote().run(list(argv), str(cwd or os.getcwd()), dict(os.environ if env is None else env), timeout)


class _Zygote:
    """One warm server process, owned by this process; requests are served one at a time."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen([sys.executable, "-c", "from posttrain.testing.cli_fork import serve; serve()",
                                      str(theirs.fileno())], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock, self.lock = ours, threading.Lock()
        self.reader = self.sock.makefile("r")
        assert json.loads(self.reader.readline()) == {"ready": True}, "the CLI zygote did not start"

    def run(self, argv: list[str], cwd: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        with self.lock:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            null = os.open(os.devnull, os.O_RDONLY)
            try:
                msg = json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode() + b"\n"
                socket.send_fds(self.sock, [msg], [null, out_w, err_w])
            finally:
                for fd in (null, out_w, err_w):
                    os.close(fd)
            assert "pid" in json.loads(self.reader.readline())  # forked: a `kill` sent from now on finds it
            chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
            readers = [threading.Thread(target=_drain, args=(fd, chunks[fd]), daemon=True) for fd in chunks]
            for t in readers:
                t.start()
            end = time.monotonic() + timeout
            for t in readers:
                t.join(max(0.0, end - time.monotonic()))
            if any(t.is_alive() for t in readers):  # the command outlived its timeout: kill it, as subprocess.run
                self.sock.sendall(b"kill\n")  # the zygote kills it (see _wait_or_kill)
                for t in readers:
                    t.join(10)  # a process it left behind may still hold the pipes: leave those threads
                self.reader.readline()
                raise subprocess.TimeoutExpired(["posttrain", *argv], timeout)
            code = json.loads(self.reader.readline())["returncode"]
            out, err = (b"".join(chunks[fd]).decode(errors="replace") for fd in (out_r, err_r))
            return subprocess.CompletedProcess(["posttrain", *argv], code, out, err)


def _drain(fd: int, into: list[bytes]) -> None:
    try:
        while chunk := os.read(fd, 65536):
            into.append(chunk)
    finally:
        os.close(fd)


_ZYGOTES: dict[int, _Zygote] = {}  # by pid: a forked test process must not share its parent's


def _zygote() -> _Zygote:
    z = _ZYGOTES.get(os.getpid())
    if z is None or z.proc.poll() is not None:
        z = _ZYGOTES[os.getpid()] = _Zygote()
    return z


def serve() -> None:
    """The zygote: import what every command imports, then fork one child per request."""
    import posttrain.cli.main as cli
    from posttrain.builtins import load_builtins

    load_builtins()
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.sendall(b'{"ready": true}\n')
    buf, fds = b"", []
    while True:
        while b"\n" not in buf:  # a long environment arrives in pieces
            msg, got, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            if not msg:
                return  # the test process is gone
            buf += msg
            fds += got
        line, buf = buf.split(b"\n", 1)
        if line == b"kill":  # a caller's timeout that crossed its command's exit: nothing left to kill
            continue
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            sock.close()
            _become(req, fds)
            os._exit(_command(cli))
        for fd in fds:
            os.close(fd)
        fds = []
        sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        status, caller_gone = _wait_or_kill(sock, pid)
        if caller_gone:
            return
        sock.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def _wait_or_kill(sock: socket.socket, pid: int) -> tuple[int, bool]:
    """Until the child `pid` exits: (wait status, whether the caller hung up). A `kill` line from
    the caller (its timeout) or its hang-up SIGKILLs the child first. The kill is sent here, by the
    parent, before the child is reaped: a pid the caller kept could, once reaped, name another
    process (pids wrap within minutes when a test suite starts thousands)."""
    pidfd = os.pidfd_open(pid)
    caller_gone = False
    try:
        while True:
            ready, _, _ = select.select([pidfd, sock], [], [])
            if pidfd in ready:
                break
            data = sock.recv(64)
            if not data or b"kill" in data:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            if not data:
                caller_gone = True
                break
    finally:
        os.close(pidfd)
    return os.waitpid(pid, 0)[1], caller_gone


def _become(req: dict, fds: list[int]) -> None:
    """In the forked child: the caller's stdin/stdout/stderr, cwd, environment and argv."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # what cli.main sets at import
    sys.argv = ["posttrain", *req["argv"]]


def _command(cli: Any) -> int:
    """`main()` to its exit status, then what a cold interpreter does at exit that anyone could see:
    non-daemon threads joined, atexit handlers run (weakref finalizers and temporary directories
    included), stdio flushed. Not the module teardown: 0.3-1 s of garbage collection over torch's
    heap that no command observes."""
    import atexit
    import threading
    import traceback

    try:
        cli.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - printed as a cold interpreter prints an uncaught exception
        traceback.print_exc()
        code = 1
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return code
