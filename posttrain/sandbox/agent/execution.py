"""One execution: C2 (pid 1 of fresh namespaces, trusted) and C3 (the program).

C2 is cloned by the zygote (C0) BEFORE its request exists, straight into new mount, pid,
ipc and uts namespaces, and prepares a clean state while it waits:

    a new network namespace (unshared here); mounts private; a fresh /proc; a fresh devpts at /dev/pts (/dev itself is read-only,
    so /dev/stdin, /dev/fd, ... cannot be replaced); ONE size-capped tmpfs whose
    subdirectories are /work, /tmp and /dev/shm (workspace_mb caps all three together);
    loopback up in the new network namespace (no socket or port of an earlier
    execution exists there).

Then C2 reads its request from its own socket (C0 never sees request bodies, so no
process that forks a program ever held another execution's argv or files), tells C0
(which prepares the next execution meanwhile), remounts the tmpfs at the request's
size, writes the files, forks C3, enforces wall time by killing every process of its
pid namespace, removes SysV shared memory, lists /work, answers on the same socket and
exits: its namespaces, mounts and tmpfs pages go with it.

C3: setsid, rlimits, default signal handling, all capabilities dropped, no_new_privs,
seccomp, then exec(argv) -- or, for `python3 FILE|-c SRC`, the code runs in-process.
Standard library only: never imports posttrain.
"""

import ctypes
import fcntl
import io
import json
import os
import resource
import signal
import socket
import struct
import sys
import threading
import time
import types

from listing import manifest, read_safely, write_files


libc = ctypes.CDLL(None, use_errno=True)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 32, 4096, 0x4000, 1 << 18
PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}", sys.executable}
CLONE_NEWNET = 0x40000000
HDR = struct.Struct("!II")
STATE = {"seccomp": b""}  # set once by the zygote from the host's hello
_PREP_SIZE = 1 << 30  # the tmpfs's size until the request names its own (it is empty until then)
_NR_INODES = 65536  # inode bombs: kernel memory per inode is not all charged to the cgroup


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def until_a_pid_is_free(fork):
    """fork() (or a clone), retried while the slot's pids limit is full: the next execution
    is prepared while the current one runs, and a fork bomb there may hold every pid until
    its wall limit kills it. Waiting is right; failing would cost the slot."""
    pause = 0.0005
    while True:
        try:
            return fork()
        except BlockingIOError:  # EAGAIN
            time.sleep(pause)
            pause = min(2 * pause, 0.01)


def _mount(src, target, fstype, flags, data=None):
    _check(libc.mount(src, target.encode(), fstype, ctypes.c_ulong(flags), data), f"mount {target}")


# ---- framing: !II (json length, payload length), json, payload; fds ride on the header --
def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def recv_msg(sock):
    head, fds, _flags, _addr = socket.recv_fds(sock, HDR.size, 8)
    if not head:
        raise EOFError
    if len(head) < HDR.size:
        head += recv_exact(sock, HDR.size - len(head))
    jlen, plen = HDR.unpack(head)
    return json.loads(recv_exact(sock, jlen)), recv_exact(sock, plen) if plen else b"", fds


def send_msg(sock, obj, payload=b"", fds=()):
    body = json.dumps(obj).encode()
    blob = HDR.pack(len(body), len(payload)) + body + payload
    if fds:
        n = socket.send_fds(sock, [blob], list(fds))
        blob = blob[n:]
    if blob:
        sock.sendall(blob)


# ---- C2 before its request: the clean state ---------------------------------------------
def prepare(new_net=True):
    # A network namespace of its own (the zygote's clone skipped it: creating one here runs
    # in parallel with the zygote telling the host this execution is ready). Fresh mode's
    # bwrap already made one for this execution alone (new_net False).
    if new_net:
        _check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(b"devpts", "/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC, b"newinstance,ptmxmode=0666,mode=620")
    # /tmp is only the place to mount the shared tmpfs; its root is then covered by /tmp/tmp.
    _mount(b"tmpfs", "/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, f"size={_PREP_SIZE},nr_inodes={_NR_INODES},mode=0755".encode())
    for name, mode in (("work", 0o755), ("shm", 0o1777), ("tmp", 0o1777)):
        os.mkdir(f"/tmp/{name}")
        os.chmod(f"/tmp/{name}", mode)
    _mount(b"/tmp/work", "/work", None, MS_BIND)
    _mount(b"/tmp/shm", "/dev/shm", None, MS_BIND)
    _mount(b"/tmp/tmp", "/tmp", None, MS_BIND)
    if new_net:
        loopback_up()


def loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS: UP|LOOPBACK|RUNNING
    finally:
        s.close()


def resize(nbytes):
    _mount(None, "/work", None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={max(nbytes, 4096)}".encode())


# ---- C2 with its request ----------------------------------------------------------------
def is_inproc(argv):
    return len(argv) > 1 and argv[0] in PYTHON_NAMES and (argv[1] == "-c" and len(argv) > 2 or not argv[1].startswith("-"))


def drop_sysv_shm():
    """SysV shared memory lives as long as its IPC namespace, which the kernel frees after
    we exit, asynchronously: remove it now (nothing is attached any more), so its pages
    are uncharged before we answer and cannot squeeze the next execution's limit."""
    try:
        with open("/proc/sysvipc/shm") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return
    for row in rows:
        fields = row.split()
        if len(fields) > 1 and fields[1].isdigit():
            libc.shmctl(int(fields[1]), 0, None)  # IPC_RMID


def supervise(pid3, wall_s):
    """Reap everything (orphans re-parent to us) until C3 exits or the wall limit passes;
    then kill the rest of the namespace. Returns (C3's wait status or None, killed)."""
    deadline, status, killed = time.monotonic() + wall_s, None, None
    while status is None:
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == pid3:
                status = st
        left = deadline - time.monotonic()
        if status is not None:
            break
        if left <= 0:
            killed = "timeout"
            break
        signal.sigtimedwait([signal.SIGCHLD], left)
    while True:  # pid 1 signals everything else in its namespace; repeat until none is left
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == pid3:
            status = st
    return status, killed


def child2(sock, taken_fd, new_net=True):
    prepare(new_net)
    try:
        req, payload, stdio = recv_msg(sock)
    except EOFError:
        os._exit(0)  # the slot closed before using this prepared execution
    try:
        os.write(taken_fd, b"t")  # the zygote starts preparing the next execution now
    except OSError:
        pass
    os.close(taken_fd)
    resize(req["ws_bytes"])
    write_files(req, payload)
    before = manifest() if req["files"] else {}
    libc.prctl(4, 0, 0, 0, 0)  # non-dumpable: the program cannot open /proc/1/mem etc.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])  # before the fork: no lost wake-up
    pid3 = until_a_pid_is_free(os.fork)
    if pid3 == 0:
        sock.close()
        child3(req, stdio)
    for fd in stdio:
        os.close(fd)
    status, killed = supervise(pid3, req["wall_s"])
    drop_sysv_shm()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = {"status": status, "killed": killed, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss": ru.ru_maxrss * 1024,
           "before": before, "after": manifest(), "files": {}}  # fmt: skip
    for rel in req["read_files"]:
        try:
            text = read_safely(rel, req["output_bytes"])
            if text is not None:
                res["files"][rel] = text
        except OSError:
            pass
    send_msg(sock, res)


# ---- C3: the program ------------------------------------------------------------------
def drop_privileges(req):
    for name, val in req["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (val, val))
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(hdr, data), "capset")
    _check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    libc.prctl(4, 1, 0, 0, 0)  # dumpable again, so /proc/self is ours (caps are gone now)
    try:  # only once dumpable: before that /proc/self/* belongs to root and the write is refused
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # the program, not the zygote, is the OOM victim
    except OSError:
        pass
    seccomp = STATE["seccomp"]
    prog = _Fprog(len(seccomp) // 8, seccomp)
    _check(libc.prctl(22, 2, ctypes.byref(prog), 0, 0), "seccomp")


def child3(req, stdio):
    os.setsid()
    for i, fd in enumerate(stdio):
        os.dup2(fd, i)
    os.closerange(3, 1 << 16)
    os.chdir("/work")
    os.umask(0o022)
    argv = req["argv"]
    inproc = is_inproc(argv)
    if inproc:  # Python's own start-up state: KeyboardInterrupt on SIGINT
        signal.signal(signal.SIGINT, signal.default_int_handler)
    else:  # an exec'd program gets the signal state of a fresh process, not Python's
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    drop_privileges(req)
    if inproc:
        run_python(argv[1:])
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, f"posttrain-sandbox: execvp {argv[0]}: {e.strerror}\n".encode())
        os._exit(127)


def run_python(args):
    """Behave like `python3 args…` started fresh, without starting an interpreter."""
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    if "random" in sys.modules:  # imported before the fork: its state is the zygote's, reseed it
        sys.modules["random"].seed()
    if args[0] == "-c":
        src, filename, sys.argv = args[1], "<string>", ["-c", *args[2:]]
        sys.path[0] = ""
    else:
        filename, sys.argv = os.path.abspath(args[0]), list(args)
        sys.path[0] = os.path.dirname(filename)
        try:
            with open(filename, "rb") as f:
                src = f.read()
        except OSError as e:
            print(f"{sys.executable}: can't open file {filename!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
            finish(2)
    if filename.endswith(".pyc") and isinstance(src, bytes):  # as CPython runs `python3 x.pyc`
        import _frozen_importlib_external
        import marshal

        if src[:4] != _frozen_importlib_external.MAGIC_NUMBER:
            print("RuntimeError: Bad magic number in .pyc file", file=sys.stderr)
            finish(1)
        try:
            src = marshal.loads(src[16:])
        except (EOFError, ValueError, TypeError):
            print("RuntimeError: Bad code object in .pyc file", file=sys.stderr)
            finish(1)
    elif isinstance(src, bytes) and b"\0" in src:
        os.execv(sys.executable, [sys.executable, *args])  # the file tokenizer's exact error message
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__ = filename, __builtins__
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(src if isinstance(src, types.CodeType) else compile(src, filename, "exec"), main.__dict__)
    except SystemExit as e:
        code = e.code
    except BaseException as e:  # noqa: BLE001 - report exactly as the interpreter would
        tb = e.__traceback__.tb_next if e.__traceback__ else None  # hide this frame
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        code = 1
    finish(code)


def finish(code):
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        code = code or 120
    os._exit(code & 0xFF)
