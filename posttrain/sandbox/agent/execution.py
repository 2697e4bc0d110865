"""One execution: C2 (pid 1 of fresh namespaces, trusted) and C3 (the program).

C2 is cloned by the zygote (C0) BEFORE its request exists, straight into new mount, pid,
ipc and uts namespaces, and prepares a clean state while it waits:

    a new network namespace (unshared here); mounts private; a fresh /proc; a fresh devpts at /dev/pts (/dev itself is read-only,
    so /dev/stdin, /dev/fd, ... cannot be replaced); ONE size-capped tmpfs whose
    subdirectories are /work, /tmp and /dev/shm (workspace_mb caps all three together);
    loopback up in the new network namespace (no socket or port of an earlier
    execution exists there).

Then C2 forks C3, still before the request: C3 (pid 2) starts a session, drops every
capability, sets no_new_privs, makes itself the OOM victim, installs the seccomp filter
and waits on a socket of its own for the request's go. Neither process has seen any
request yet, so the program's process never held another execution's data.

C2 reads its request from its own socket (C0 never sees request bodies), tells C0 (which
prepares the next execution meanwhile), remounts the tmpfs at the request's size, writes
the files and hands C3 the argv, rlimits and stdio. C3 applies them and runs the program
(exec(argv), or, for `python3 FILE|-c SRC`, the code in-process). C2 enforces wall time
by killing every process of its pid namespace, removes SysV shared memory, lists /work,
answers on the same socket and exits: its namespaces, mounts and tmpfs pages go with it.
The request path does no fork and no privilege drop: both were done ahead.
Standard library only: never imports posttrain.
"""

import ctypes
import json
import marshal
import os
import resource
import signal
import socket
import struct
import sys
import time

import _signal  # the C functions: signal.py's wrappers convert to enums, which costs faults in every fresh child

from inproc import run_python
from listing import manifest, read_safely, write_files


libc = ctypes.CDLL(None, use_errno=True)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 32, 4096, 0x4000, 1 << 18
PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}", sys.executable}
CLONE_NEWNET = 0x40000000
HDR = struct.Struct("!II")
STATE = {"seccomp": b"", "fprog": None, "rprivate": True}  # set once by the zygote (set_seccomp, check_propagation)
# The tmpfs's size until the request names its own (it is empty until then): the default
# workspace_mb (ExecLimits), so the usual request needs no remount on its path.
_PREP_SIZE = 64 << 20
_NR_INODES = 65536  # inode bombs: kernel memory per inode is not all charged to the cgroup


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


# Built once in the zygote: a forked child that builds nothing touches (and copies) fewer pages.
_CAP_HDR = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
_CAP_NONE = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: empty (both words)
_prctl, _capset, _unshare = libc.prctl, libc.capset, libc.unshare
_SIGCHLD, _SIGKILL, _SIGINT = int(signal.SIGCHLD), int(signal.SIGKILL), int(signal.SIGINT)


def set_seccomp(prog):
    STATE["seccomp"] = prog
    STATE["fprog"] = _Fprog(len(prog) // 8, prog)


def check_propagation():
    """Whether each execution must make its copy of the mount tree private. bwrap leaves
    every mount of the zygote's tree private (no shared:/master: tag), and an execution's
    mount namespace is a copy, private too: then re-marking it per execution (a walk of
    every mount) is skipped. Any propagating mount keeps the per-execution MS_PRIVATE."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                optional = line.split(" - ", 1)[0].split()[6:]
                if any(tag.startswith(("shared:", "master:", "propagate_from:")) for tag in optional):
                    return
    except OSError:
        return
    STATE["rprivate"] = False


# SIOCSIFFLAGS on "lo": UP|LOOPBACK|RUNNING (struct ifreq: name, flags)
_IFREQ_LO_UP = ctypes.create_string_buffer(struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40), 40)
_socket_c, _ioctl_c, _close_c = libc.socket, libc.ioctl, libc.close


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
# JSON through the C scanner and encoder directly: json.loads/dumps' Python layers (and the
# regex they use) cost every freshly forked process page faults, on the request path.
_SCAN = json.JSONDecoder().scan_once


def _unserializable(o):
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


_ENCODE = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, _unserializable, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
)


def dumps(obj):
    return "".join(_ENCODE(obj, 0)).encode() if _ENCODE else json.dumps(obj).encode()


def loads(blob):
    return _SCAN(blob.decode(), 0)[0]


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def recv_msg(sock, bufsize=HDR.size):
    """One message. A `bufsize` over the header's reads ahead: only for a socket that
    carries this one message (the next message's bytes would be lost)."""
    head, fds, _flags, _addr = socket.recv_fds(sock, bufsize, 8)
    if not head:
        raise EOFError
    if len(head) < HDR.size:
        head += recv_exact(sock, HDR.size - len(head))
    jlen, plen = HDR.unpack_from(head)
    end = HDR.size + jlen + plen
    if len(head) < end:
        head += recv_exact(sock, end - len(head))
    return loads(head[HDR.size : HDR.size + jlen]), head[HDR.size + jlen : end], fds


def send_msg(sock, obj, payload=b"", fds=()):
    body = dumps(obj)
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
        _check(_unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    if STATE["rprivate"]:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(b"devpts", "/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC, b"newinstance,ptmxmode=0666,mode=620")
    # /tmp is only the place to mount the shared tmpfs; its root is then covered by /tmp/tmp.
    _mount(b"tmpfs", "/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, f"size={_PREP_SIZE},nr_inodes={_NR_INODES},mode=0755".encode())
    umask = os.umask(0)
    for path, mode in (("/tmp/work", 0o755), ("/tmp/shm", 0o1777), ("/tmp/tmp", 0o1777)):
        os.mkdir(path, mode)
    os.umask(umask)
    _mount(b"/tmp/work", "/work", None, MS_BIND)
    _mount(b"/tmp/shm", "/dev/shm", None, MS_BIND)
    _mount(b"/tmp/tmp", "/tmp", None, MS_BIND)
    if new_net:
        loopback_up()


def loopback_up():
    fd = _socket_c(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, 0)
    if fd < 0:
        _check(-1, "socket(AF_INET)")
    try:
        _check(_ioctl_c(fd, 0x8914, _IFREQ_LO_UP), "SIOCSIFFLAGS lo")  # raw: no socket object, no struct per call
    finally:
        _close_c(fd)


def resize(nbytes):
    """The tmpfs (still empty) at the request's workspace size."""
    nbytes = max(nbytes, 4096)
    if nbytes != _PREP_SIZE:
        _mount(None, "/work", None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={nbytes}".encode())


# ---- C2 with its request ----------------------------------------------------------------
def is_inproc(argv):
    return len(argv) > 1 and argv[0] in PYTHON_NAMES and (argv[1] == "-c" and len(argv) > 2 or not argv[1].startswith("-"))


def drop_sysv_shm():
    """SysV shared memory lives as long as its IPC namespace, which the kernel frees after
    we exit, asynchronously: remove it now (nothing is attached any more), so its pages
    are uncharged before we answer and cannot squeeze the next execution's limit."""
    try:
        fd = os.open("/proc/sysvipc/shm", os.O_RDONLY)
    except OSError:
        return
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    for row in b"".join(chunks).splitlines()[1:]:
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
        _signal.sigtimedwait((_SIGCHLD,), left)
    while True:  # pid 1 signals everything else in its namespace; repeat until none is left
        try:
            os.kill(-1, _SIGKILL)
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
    _prctl(4, 0, 0, 0, 0)  # non-dumpable: the program cannot open /proc/1/mem etc.
    _signal.pthread_sigmask(_signal.SIG_BLOCK, (_SIGCHLD,))  # before the fork: no lost wake-up
    go, go3 = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid3 = until_a_pid_is_free(os.fork)
    if pid3 == 0:  # C3, prepared before any request exists: it never holds C2's socket
        sock.close()
        go.close()
        os.close(taken_fd)
        child3(go3)
    go3.close()
    try:
        req, payload, stdio = recv_msg(sock, 1 << 16)  # the host sends this socket one request
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
    go_blob = marshal.dumps((req["argv"], req["rlimits"]))
    go_blob = HDR.pack(len(go_blob), 0) + go_blob
    n = socket.send_fds(go, [go_blob], stdio)  # C3 runs the program now
    if n < len(go_blob):
        go.sendall(go_blob[n:])
    go.close()
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
def drop_privileges():
    """Before the request: nothing of the program's own is needed for any of this."""
    _prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    _check(_capset(_CAP_HDR, _CAP_NONE), "capset")
    _check(_prctl(38, 1, 0, 0, 0), "no_new_privs")
    _prctl(4, 1, 0, 0, 0)  # dumpable again, so /proc/self is ours (caps are gone now)
    try:  # only once dumpable: before that /proc/self/* belongs to root and the write is refused
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, b"1000")  # the program, not the zygote, is the OOM victim
        finally:
            os.close(fd)
    except OSError:
        pass
    _check(_prctl(22, 2, ctypes.byref(STATE["fprog"]), 0, 0), "seccomp")


def child3(go):
    """C3: made ready before its request (session, cwd, no capability, seccomp), then
    waits for C2's go: the argv, rlimits and stdio of the request."""
    os.setsid()
    os.chdir("/work")
    os.umask(0o022)
    fd = go.detach()
    if fd != 3:
        os.dup2(fd, 3)
        os.close(fd)
    os.closerange(4, 1 << 16)  # every fd inherited from C2 and the zygote
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
    drop_privileges()
    go = socket.socket(fileno=3)
    head, stdio, _flags, _addr = socket.recv_fds(go, 4096, 3)
    if not head:
        os._exit(0)  # the slot closed before using this prepared execution
    if len(head) < HDR.size:
        head += recv_exact(go, HDR.size - len(head))
    size = HDR.unpack_from(head)[0] + HDR.size
    if len(head) < size:
        head += recv_exact(go, size - len(head))
    argv, rlimits = marshal.loads(head[HDR.size :])
    for i, fd in enumerate(stdio):
        os.dup2(fd, i)
    go.close()
    os.closerange(3, 1 << 16)
    for name, val in rlimits.items():
        resource.setrlimit(getattr(resource, name), (val, val))
    if is_inproc(argv):  # Python's own start-up state: KeyboardInterrupt on SIGINT
        _signal.signal(_SIGINT, _signal.default_int_handler)
        run_python(argv[1:])
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # an exec'd program gets the signal state of a fresh process
        _signal.signal(sig, _signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, f"posttrain-sandbox: execvp {argv[0]}: {e.strerror}\n".encode())
        os._exit(127)
