"""The in-sandbox HumanEval checker: trusted process P, candidate process C (see humaneval.py).

`RUNNER` is the program text (`python3 -c RUNNER`, standard library only). Order of
events in P, each step there for a reason:

1. PR_SET_DUMPABLE 0 first: from then on a same-uid process cannot open /proc/P/mem,
   /proc/P/fd/*, /proc/P/environ (ptrace and process_vm_* are denied by seccomp anyway).
2. fork C *before* reading stdin: C's memory never holds the token, the tests or the
   trusted prompt. C points fds 0-2 at /dev/null and closes every other fd but its two
   pipes before any candidate code runs, so it cannot write P's stdout or read P's stdin.
3. read the job from stdin, send C the program, exec prompt + test in P's own namespace,
   bind the entry point and `check`'s argument to a proxy that calls C over the pipes.
   P imports only from read-only directories (C can write /work and /tmp).
4. decode each answer with `plain_data.loads` (builtins only); print the pass marker with
   the token only if `check` returned.

Frames on the pipes: 4-byte big-endian length, then `plain_data` bytes. Requests
("call", args, kwargs); replies ("ret", value) | ("exc", type name) | ("bad", reason).
"""

from __future__ import annotations

from posttrain.verifiers.plain_data import SOURCE as _CODEC

RUNNER = _CODEC + r'''
import builtins, ctypes, json, os, signal, struct, sys

_HDR = struct.Struct("!I")
_libc = ctypes.CDLL(None, use_errno=True)


class CandidateError(RuntimeError):
    """What the test sees when the candidate misbehaves (bad value, died, raised oddly)."""


def _write_all(fd, blob):
    view = memoryview(_HDR.pack(len(blob)) + blob)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the candidate process went away")
        buf += chunk
    return bytes(buf)


def _recv(fd):
    (n,) = _HDR.unpack(_read_exact(fd, _HDR.size))
    if n > MAX_BYTES:
        raise ValueError("reply larger than %d bytes" % MAX_BYTES)
    return loads(_read_exact(fd, n))


# ---- C: the candidate. Nothing secret was ever in this process. -----------------------
def _candidate(req_r, resp_w):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    lo, hi = sorted((req_r, resp_w))
    os.closerange(3, lo)
    os.closerange(lo + 1, hi)
    os.closerange(hi + 1, 1 << 16)
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = sys.stderr = open(1, "w", closefd=False)
    _libc.prctl(4, 1, 0, 0, 0)  # dumpable again: its own /proc/self is the candidate's to read
    try:
        program, entry = loads(_read_exact(req_r, _HDR.unpack(_read_exact(req_r, _HDR.size))[0]))
    except BaseException:
        os._exit(3)
    g = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        exec(compile(program, "program.py", "exec"), g)
        f = g[entry]
        reply = ("ret", None)
    except BaseException as e:
        f, reply = None, ("exc", _exc_name(e))
    _write_all(resp_w, dumps(reply))
    if f is None:
        os._exit(0)
    while True:
        try:
            (n,) = _HDR.unpack(_read_exact(req_r, _HDR.size))
            _op, args, kwargs = loads(_read_exact(req_r, n))
        except BaseException:
            os._exit(0)
        try:
            reply = ("ret", f(*args, **kwargs))
        except BaseException as e:
            reply = ("exc", _exc_name(e))
        try:
            blob = dumps(reply)
        except BaseException as e:  # not plain data, too deep, or a broken encoder
            blob = dumps(("bad", "result is not plain data"))
        _write_all(resp_w, blob)


def _exc_name(e):
    try:
        name = type(e).__name__
        return name[:100] if type(name) is str else "Exception"
    except BaseException:
        return "Exception"


# ---- P: the checker ---------------------------------------------------------------------
def _raise_as(name):
    exc = getattr(builtins, name, None) if type(name) is str else None
    # StopIteration would end a map()/iterator in the test early instead of failing it
    if isinstance(exc, type) and issubclass(exc, Exception) and not issubclass(exc, (StopIteration, StopAsyncIteration)):
        raise exc()
    raise CandidateError("candidate raised %r" % (name,))


def _reply(resp_r):
    """C's answer to the last request: its value, or the exception it raised (re-raised here)."""
    try:
        r = _recv(resp_r)
    except (OSError, EOFError, ValueError) as e:  # the transport, not the candidate's exception
        raise CandidateError("candidate failed: %s" % e) from None
    if type(r) is not tuple or len(r) != 2:
        raise CandidateError("malformed reply")
    kind, value = r
    if kind == "ret":
        return value
    if kind == "exc":
        _raise_as(value)
    raise CandidateError("candidate returned a value that is not plain data")


def _trusted_import_path():
    """Only absolute, read-only directories: the tests import modules (copy, random...)
    after C is running, and C can write /work and /tmp (a planted copy.py would run in P)."""
    sys.path[:] = [d for d in sys.path if os.path.isabs(d) and not os.access(d or ".", os.W_OK)
                   and not d.startswith(("/work", "/tmp"))]
    sys.path_importer_cache.clear()


def _main():
    _libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, before C exists
    if _libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_GET_DUMPABLE: never judge from a readable process
        sys.stdout.write("\n@@INFRA@@ checker could not make itself non-dumpable\n")
        sys.stdout.flush()
        os._exit(0)
    _trusted_import_path()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(req_w)
            os.close(resp_r)
            _candidate(req_r, resp_w)
        finally:
            os._exit(0)
    os.close(req_r)
    os.close(resp_w)
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    job = json.loads(b"".join(chunks))
    token, entry = job["token"], job["entry"]

    def candidate(*args, **kwargs):
        try:
            blob = dumps(("call", args, kwargs))
        except TypeError as e:
            raise CandidateError("test argument is not plain data: %s" % e) from None
        try:
            _write_all(req_w, blob)
        except OSError as e:
            raise CandidateError("candidate failed: %s" % e) from None
        return _reply(resp_r)

    passed = False
    try:
        _write_all(req_w, dumps((job["program"], entry)))
        _reply(resp_r)  # the program loaded and defines the entry point
        ns = {"__name__": "__check__", "__builtins__": builtins}
        exec(compile(job["prompt"] + "\n\n" + job["test"], "test.py", "exec"), ns)
        ns[entry] = candidate
        ns["check"](candidate)
        passed = True
    except BaseException as e:
        msg = ""
        try:
            msg = str(e)[:200]
        except BaseException:
            pass
        sys.stdout.write("\n@@FAIL@@ %s: %s\n" % (type(e).__name__, msg))
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    if passed:
        sys.stdout.write("\n@@PASS@@" + token + "\n")
    sys.stdout.flush()
    os._exit(0)

_main()
'''
