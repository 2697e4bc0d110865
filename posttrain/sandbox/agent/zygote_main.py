"""The zygote (C0): a warm Python interpreter inside a bwrap sandbox that pre-forks executions.

Runs inside the sandbox as uid 1000 holding CAP_SYS_ADMIN and CAP_NET_ADMIN *in the
sandbox's own user namespace only* (it can mount tmpfs and bring up a loopback there,
nothing on the host). It never reads a request:

    C0 --clone(new mount, pid, ipc, uts namespaces; C2 adds a net one)--> C2, before any request exists
       C0 sends the host one end of a fresh socketpair: {"op": "ready", "seq": k} + fd
    host --request, files, stdio fds--> C2 directly (see execution.py for C2 and C3),
       and {"op": "taken", "seq": k} to C0, which clones C2 k+1 at once (the next "ready")
    C2 answers the host on that socket and exits -> its namespaces, mounts, tmpfs, sockets go
    C0 reaps it: {"op": "exited", "seq": k, "init": wait status}

So the process every program is forked from (C2) holds no earlier execution's data: C0's
heap only ever saw the host's hello and kill requests. The next execution's clean state
(namespaces, mounts, loopback) is built while the previous one runs. Host kill requests ({"op": "kill", "seq": k}) are enforced by killing C2, the
namespace's pid 1, which takes every process in it along.

`--once` (fresh mode): one execution, then "exited" and {"op": "exit"}, and exit.
Standard library only: never imports posttrain.
"""

import ctypes
import os
import select
import signal
import socket
import sys

import execution
from execution import libc, recv_msg, send_msg

NS_CLONE = 0x20000 | 0x04000000 | 0x08000000 | 0x20000000  # NEWNS|NEWUTS|NEWIPC|NEWPID (C2 unshares NEWNET itself)
_pylib = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL is held across the call, as os.fork does
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]


def clone_into_namespaces(flags):
    """fork() that lands the child directly in new namespaces (it is pid 1 of its own)."""
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = _pylib.syscall(ctypes.c_long(_SYS_CLONE), ctypes.c_ulong(flags | signal.SIGCHLD), None, None, None, None)
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


def prefork(ctrl_fd):
    """Start the next execution's C2; returns (pid, pidfd, host end of its socket)."""
    host_end, mine = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = clone_into_namespaces(NS_CLONE)
    if pid == 0:
        os.close(ctrl_fd)
        host_end.close()
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the zygote
        # pid 1 gets only the signals it handles from inside its namespace: handle none, so
        # the program cannot interrupt it (Python's own SIGINT handler would let it).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            execution.child2(mine)
        except BaseException as e:  # noqa: BLE001 - the host sees EOF and this line in the zygote log
            try:
                os.write(2, f"posttrain-sandbox: execution setup failed: {type(e).__name__}: {e}\n".encode())
            except OSError:
                pass
            os._exit(121)
        os._exit(0)
    mine.close()
    return pid, os.pidfd_open(pid), host_end


def serve(ctrl, once):
    """Keep one prepared C2 ahead: a new one is cloned as soon as the host takes the
    current one ({"op": "taken"}), so it gets ready while the taken one runs."""
    live = {}  # seq -> (pid, pidfd) of every C2 not yet reaped
    by_fd = {}
    poller = select.poll()
    poller.register(ctrl.fileno(), select.POLLIN)

    def prepare_next(seq):
        pid, pidfd, host_end = prefork(ctrl.fileno())
        live[seq], by_fd[pidfd] = (pid, pidfd), seq
        poller.register(pidfd, select.POLLIN)
        send_msg(ctrl, {"op": "ready", "seq": seq}, fds=[host_end.fileno()])
        host_end.close()

    newest = 0
    prepare_next(newest)
    while True:
        for fd, _ev in poller.poll():
            if fd in by_fd:
                seq = by_fd.pop(fd)
                pid, _ = live.pop(seq)
                _, st = os.waitpid(pid, 0)
                poller.unregister(fd)
                os.close(fd)
                send_msg(ctrl, {"op": "exited", "seq": seq, "init": st})
                if once:
                    send_msg(ctrl, {"op": "exit"})
                    return
                if seq == newest:  # it died unused (killed from outside): prepare a replacement
                    newest += 1
                    prepare_next(newest)
                continue
            try:
                msg, _payload, extra = recv_msg(ctrl)
            except (EOFError, ConnectionError):
                for pid, _ in live.values():
                    os.kill(pid, signal.SIGKILL)
                return
            for f in extra:
                os.close(f)
            if msg.get("op") == "taken" and msg.get("seq") == newest and not once:
                newest += 1
                prepare_next(newest)
            elif msg.get("op") == "kill" and msg.get("seq") in live:
                os.kill(live[msg["seq"]][0], signal.SIGKILL)


def main():
    once = "--once" in sys.argv[2:]
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    hello, _payload, _fds = recv_msg(ctrl)
    execution.STATE["seccomp"] = bytes.fromhex(hello["seccomp"])
    if not once:  # preloaded for snippets; a one-shot sandbox would only pay their import
        import atexit, bisect, collections, dataclasses, fractions, functools, heapq  # noqa: E401,F401
        import itertools, math, operator, random, re, string, traceback, typing  # noqa: E401,F401
        import gc

        gc.collect()
        gc.freeze()  # children's collections then skip (and do not copy-on-write) the zygote's objects
    serve(ctrl, once)


if __name__ == "__main__":
    main()
