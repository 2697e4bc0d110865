"""The zygote (C0): a warm Python interpreter inside a bwrap sandbox that pre-forks executions.

Runs inside the sandbox as uid 1000 holding CAP_SYS_ADMIN and CAP_NET_ADMIN *in the
sandbox's own user namespace only* (it can mount tmpfs and bring up a loopback there,
nothing on the host). It never reads a request:

    C0 --clone(new mount, pid, ipc, uts namespaces; C2 adds a net one)--> C2, before any request exists
       C0 sends the host one end of a fresh socketpair: {"op": "ready", "seq": k} + fd
       C2 prepares its clean state and forks the program's process C3, which drops its
       privileges and waits for C2's go -- all still before any request exists
    host --request, files, stdio fds--> C2 directly (see execution.py for C2 and C3);
       C2 writes one byte to its "taken" pipe, and C0 clones C2 k+1 at once (the next "ready")
       C2 writes the files and hands C3 the argv, rlimits and stdio: no fork on the request path
    C2 answers the host on that socket and exits -> its namespaces, mounts, tmpfs, sockets go
    C0 reaps it: {"op": "exited", "seq": k, "init": wait status}

So the processes every program runs in (C3, forked from C2) hold no earlier execution's
data: C0's heap only ever saw the host's hello and kill requests, and C2 and C3 exist
before their request does. The next execution's clean state (namespaces, mounts,
loopback, the program's process) is built while the previous one runs. Host kill
requests ({"op": "kill", "seq": k}) are enforced by killing C2, the namespace's pid 1,
which takes every process in it along.

`--once` (fresh mode): one execution, then "exited" and {"op": "exit"}, and exit.
Standard library only: never imports posttrain.
"""

import ctypes
import os
import select
import signal
import socket
import sys

import _signal
import execution
import inproc
from execution import libc, recv_msg, send_msg

NS_CLONE = 0x20000 | 0x04000000 | 0x08000000 | 0x20000000  # NEWNS|NEWUTS|NEWIPC|NEWPID (C2 unshares NEWNET itself)
# --once: bwrap made this sandbox's uts, ipc and network namespaces for this one execution
# (loopback up, no socket, no IPC object: the zygote makes none), so C2 only needs its own
# pid namespace (the zygote stays invisible) and mount namespace (its own /proc and tmpfs).
NS_CLONE_ONCE = 0x20000 | 0x20000000  # NEWNS|NEWPID
NEW_NET_IN_C2 = 1 << 62  # not a clone flag: tells prefork that C2 unshares a network namespace
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


def prefork(ctrl_fd, flags):
    """Start the next execution's C2; returns (pid, pidfd, host end of its socket, the read
    end of its "taken" pipe: C2 writes one byte there when its request arrives)."""
    host_end, mine = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    taken_r, taken_w = os.pipe2(os.O_CLOEXEC)
    pid = execution.until_a_pid_is_free(lambda: clone_into_namespaces(flags & ~NEW_NET_IN_C2))
    if pid == 0:
        os.close(ctrl_fd)
        os.close(taken_r)
        host_end.close()
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the zygote
        # pid 1 gets only the signals it handles from inside its namespace: handle none, so
        # the program cannot interrupt it (Python's own SIGINT handler would let it).
        _signal.signal(signal.SIGINT, _signal.SIG_DFL)
        try:
            execution.child2(mine, taken_w, new_net=bool(flags & NEW_NET_IN_C2))
        except BaseException as e:  # noqa: BLE001 - the host sees EOF and this line in the zygote log
            try:
                tb = e.__traceback__
                while tb is not None and tb.tb_next is not None:
                    tb = tb.tb_next
                where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})" if tb is not None else ""
                os.write(2, f"posttrain-sandbox: execution setup failed: {type(e).__name__}: {e}{where}\n".encode())
            except OSError:
                pass
            os._exit(121)
        os._exit(0)
    mine.close()
    os.close(taken_w)
    return pid, os.pidfd_open(pid), host_end, taken_r


def serve(ctrl, once):
    """Keep one prepared C2 ahead: a new one is cloned as soon as the current one receives
    its request (it writes to its "taken" pipe), so it gets ready while the taken one runs."""
    flags = NS_CLONE_ONCE if once else NS_CLONE | NEW_NET_IN_C2
    live = {}  # seq -> (pid, pidfd) of every C2 not yet reaped
    by_fd = {}  # pidfd -> seq
    taken_fds = {}  # taken pipe read end -> seq
    poller = select.poll()
    poller.register(ctrl.fileno(), select.POLLIN)

    def prepare_next(seq):
        pid, pidfd, host_end, taken_r = prefork(ctrl.fileno(), flags)
        live[seq], by_fd[pidfd], taken_fds[taken_r] = (pid, pidfd), seq, seq
        poller.register(pidfd, select.POLLIN)
        poller.register(taken_r, select.POLLIN)
        send_msg(ctrl, {"op": "ready", "seq": seq}, fds=[host_end.fileno()])
        host_end.close()

    newest = 0
    prepare_next(newest)
    while True:
        for fd, _ev in poller.poll():
            if fd in taken_fds:  # its request arrived (a byte) or it exited (EOF): never again
                seq = taken_fds.pop(fd)
                poller.unregister(fd)
                got = os.read(fd, 1)
                os.close(fd)
                if got and seq == newest and not once:
                    newest += 1
                    prepare_next(newest)
                continue
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
            if msg.get("op") == "kill" and msg.get("seq") in live:
                os.kill(live[msg["seq"]][0], signal.SIGKILL)


def main():
    once = "--once" in sys.argv[2:]
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    hello, _payload, _fds = recv_msg(ctrl)
    execution.set_seccomp(bytes.fromhex(hello["seccomp"]))
    inproc.make_stdio()
    execution.check_propagation()
    if not once:  # preloaded for snippets; a one-shot sandbox would only pay their import
        import atexit, bisect, collections, dataclasses, fractions, functools, heapq  # noqa: E401,F401
        import itertools, math, operator, random, re, string, traceback, typing  # noqa: E401,F401
        import gc

        gc.collect()
        gc.freeze()  # children's collections then skip (and do not copy-on-write) the zygote's objects
    serve(ctrl, once)


if __name__ == "__main__":
    main()
