"""C3's in-process Python: `python3 FILE|-c SRC` run in the forked interpreter itself,
behaving as a freshly started `python3` would (no interpreter start-up).

Its sys.stdin/stdout/stderr are built once in the zygote (`make_stdio`), before any
request, and never used there: each C3 adopts its own copy-on-write copy, pristine.
Standard library only: never imports posttrain.
"""

import io
import os
import sys
import types


def _new_stdio():
    return (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True),
    )


def make_stdio():
    """The in-process program's sys.stdin/stdout/stderr, built once in the zygote and never
    used there: each C3 adopts its own copy, pristine, after putting the request's pipes at
    fds 0, 1, 2. They only hold those fd numbers. Built while 0, 1, 2 are pipes, as the
    request's stdio always is, so what they learn at construction (not seekable, no
    position) is what they would learn of the request's own pipes."""
    r, w = os.pipe()
    saved = [os.dup(i) for i in range(3)]
    try:
        os.dup2(r, 0)
        os.dup2(w, 1)
        os.dup2(w, 2)
        STDIO[:] = _new_stdio()
    finally:
        for i, fd in enumerate(saved):
            os.dup2(fd, i)
            os.close(fd)
        os.close(r)
        os.close(w)


STDIO = []
# The interpreter's own std streams stay referenced here, so replacing them in C3 never
# finalizes them (a flush-and-close through the io stack, paid in page faults per execution).
_OWN_STDIO = (sys.stdin, sys.stdout, sys.stderr)


def run_python(args):
    """Behave like `python3 args…` started fresh, without starting an interpreter.

    `random`, if the zygote imported it, was reseeded from the kernel by its own at-fork
    hook when C3 was forked (os.fork runs it), so its state is this execution's own."""
    sys.stdin, sys.stdout, sys.stderr = STDIO or _new_stdio()
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
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
        threading = sys.modules.get("threading")  # as the interpreter's own exit: only if the program imported it
        if threading is not None:
            threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        code = code or 120
    os._exit(code & 0xFF)
