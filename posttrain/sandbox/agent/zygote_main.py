"""The zygote: a warm Python interpreter inside a bwrap sandbox that forks executions.

Runs inside the sandbox as uid 1000 holding CAP_SYS_ADMIN *in the sandbox's own user
namespace only* (it can mount tmpfs there, nothing on the host). Per request:

    C0 (this loop) --clone(new mount, pid, ipc, uts[, net] namespaces)--> C2
    C2 = pid 1 of a fresh pid namespace: private mounts, fresh /proc, a fresh size-capped
         tmpfs at /work and /tmp, the request's files; non-dumpable; --fork--> C3
    C3 = the program: setsid, rlimits, all capabilities dropped, no_new_privs, seccomp,
         then exec(argv) -- or, for `python3 FILE|-c SRC`, the code runs in-process, so a
         snippet pays neither exec nor interpreter start-up.
    C3 exits -> C2 kills everything else in the namespace, lists /work (never following
    symlinks), sends the result up, exits -> the namespace and its mounts are gone.

C0 never runs request code, so every execution starts from the same pristine state.
Wall time and host kill requests are enforced by C0 killing C2, the namespace's pid 1,
which takes every process in the namespace with it. Standard library only: never imports posttrain.
"""

import ctypes
import hashlib
import json
import os
import resource  # preloaded: imported after each fork it cost an extension-module load per execution
import select
import signal
import socket
import stat
import struct
import sys
import time

import atexit  # noqa: F401  (preloaded for snippets)
import collections, functools, itertools, math, random, re, string, typing  # noqa: E401,F401
import bisect, dataclasses, fractions, heapq, io, operator, traceback, threading, types  # noqa: E401,F401

libc = ctypes.CDLL(None, use_errno=True)
NS_BASE = 0x20000 | 0x04000000 | 0x08000000 | 0x20000000  # NEWNS | NEWUTS | NEWIPC | NEWPID
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}", sys.executable}
SECCOMP = b""
HDR = struct.Struct("!II")


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


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


def send_msg(sock, obj, payload=b""):
    blob = json.dumps(obj).encode()
    sock.sendall(HDR.pack(len(blob), len(payload)) + blob + payload)


# ---- C3: the program ---------------------------------------------------------------
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
    prog = _Fprog(len(SECCOMP) // 8, SECCOMP)
    _check(libc.prctl(22, 2, ctypes.byref(prog), 0, 0), "seccomp")


def child3(req, stdio):
    os.setsid()
    for i, fd in enumerate(stdio):
        os.dup2(fd, i)
    os.closerange(3, 1 << 16)
    os.chdir("/work")
    drop_privileges(req)
    argv = req["argv"]
    if req["inproc"]:
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
    random.seed()
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
    if isinstance(src, bytes) and b"\0" in src:
        os.execv(sys.executable, [sys.executable, *args])  # the file tokenizer's exact error message
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__ = filename, __builtins__
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(compile(src, filename, "exec"), main.__dict__)
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
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        code = code or 120
    os._exit(code & 0xFF)


# ---- C2: pid 1 of the execution -----------------------------------------------------
def setup_mounts(req):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(b"tmpfs", "/work", b"tmpfs", MS_NOSUID | MS_NODEV, f"size={req['ws_bytes']},mode=0755".encode())
    _mount(b"tmpfs", "/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, f"size={req['tmp_bytes']},mode=1777".encode())


def write_files(req, payload):
    off = 0
    for rel, size in req["files"]:
        path = os.path.join("/work", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(payload[off : off + size])
        off += size


def manifest(root="/work", cap=20000):
    out = {}
    stack = [""]
    while stack and len(out) < cap:
        prefix = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, prefix) if prefix else root))
        except OSError:
            continue
        for e in entries:
            rel = prefix + e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel + "/")
            elif stat.S_ISLNK(st.st_mode):
                t = os.fsencode(os.readlink(e.path))
                out[rel] = [len(t), hashlib.sha256(b"symlink:" + t).hexdigest()]
            elif stat.S_ISREG(st.st_mode):
                out[rel] = [st.st_size, hash_file(e.path)]
    return out


def hash_file(path):
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_safely(rel, cap):
    """Read /work/rel without following any symlink on the way."""
    dfd = os.open("/work", os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            nfd = os.open(part, os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(cap).decode("utf-8", errors="replace")


def child2(req, payload, stdio, rpipe):
    setup_mounts(req)
    write_files(req, payload)
    before = manifest() if req["files"] else {}
    libc.prctl(4, 0, 0, 0, 0)  # non-dumpable: the program cannot open /proc/1/mem etc.
    pid3 = os.fork()
    if pid3 == 0:
        os.close(rpipe)
        child3(req, stdio)
    for fd in stdio:
        os.close(fd)
    status = 0
    while True:
        pid, st = os.waitpid(-1, 0)
        if pid == pid3:
            status = st
            break
    try:
        os.kill(-1, signal.SIGKILL)  # pid 1: everything else in this namespace
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = {"status": status, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss": ru.ru_maxrss * 1024, "before": before, "after": manifest(), "files": {}}
    for rel in req["read_files"]:
        try:
            text = read_safely(rel, req["output_bytes"])
            if text is not None:
                res["files"][rel] = text
        except OSError:
            pass
    blob = json.dumps(res).encode()
    view = memoryview(blob)
    while view:
        view = view[os.write(rpipe, view) :]
    os._exit(0)


# ---- C0 ------------------------------------------------------------------------------
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


def start_execution(req, payload, stdio, rpipe, ctrl_fd):
    pid = clone_into_namespaces(NS_BASE | (CLONE_NEWNET if req.get("netns") else 0))
    if pid:
        return pid
    os.close(ctrl_fd)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the zygote
    try:
        child2(req, payload, stdio, rpipe)
    except BaseException as e:  # noqa: BLE001
        os.write(stdio[2], f"posttrain-sandbox: setup failed: {e}\n".encode())
    os._exit(121)


def run_one(ctrl, req, payload, fds):
    rpipe_r, rpipe_w = os.pipe()
    t0 = time.monotonic()
    pid = start_execution(req, payload, fds, rpipe_w, ctrl.fileno())
    for fd in (*fds, rpipe_w):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in (pidfd, rpipe_r, ctrl.fileno()):
        poller.register(fd, select.POLLIN)
    deadline, killed, exited, data, rdone = t0 + req["wall_s"], None, False, bytearray(), False
    while not (exited and rdone):
        wait = deadline - time.monotonic()
        if wait <= 0 and killed is None:
            killed = "timeout"
            os.kill(pid, signal.SIGKILL)
        for fd, _ev in poller.poll(1000 if killed or exited else max(1, int(wait * 1000) + 1)):
            if fd == ctrl.fileno():
                msg, _p, extra = recv_msg(ctrl)
                for f in extra:
                    os.close(f)
                if msg.get("op") == "kill" and msg.get("id") == req["id"] and killed is None:
                    killed = msg.get("reason", "killed")
                    os.kill(pid, signal.SIGKILL)
            elif fd == rpipe_r:
                chunk = os.read(rpipe_r, 1 << 20)
                if chunk:
                    data += chunk
                else:
                    rdone = True
                    poller.unregister(rpipe_r)
            elif fd == pidfd:
                exited = True
                poller.unregister(pidfd)
        if exited and not rdone and killed:
            rdone = True  # C2 was killed; nothing more will come
    _, st = os.waitpid(pid, 0)
    os.close(pidfd)
    os.close(rpipe_r)
    try:
        res = json.loads(data) if data else {}
    except ValueError:
        res = {}
    res.update({"id": req["id"], "killed": killed, "wall_s": time.monotonic() - t0, "init": st})
    return res


def main():
    global SECCOMP
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    hello, _payload, _fds = recv_msg(ctrl)
    SECCOMP = bytes.fromhex(hello["seccomp"])
    import gc

    gc.collect()
    gc.freeze()  # children's collections then skip (and do not copy-on-write) the zygote's objects
    send_msg(ctrl, {"ready": True})
    while True:
        try:
            req, payload, fds = recv_msg(ctrl)
        except (EOFError, ConnectionError):
            return
        if req.get("op") != "exec":
            for f in fds:
                os.close(f)
            continue
        req["inproc"] = bool(req["argv"]) and req["argv"][0] in PYTHON_NAMES and len(req["argv"]) > 1 and (
            req["argv"][1] == "-c" and len(req["argv"]) > 2 or not req["argv"][1].startswith("-")
        )
        send_msg(ctrl, run_one(ctrl, req, payload, fds))


if __name__ == "__main__":
    main()
