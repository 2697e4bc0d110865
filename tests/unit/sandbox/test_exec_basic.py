"""Control tests: correct programs succeed with exact output; statuses map correctly."""

from __future__ import annotations

from posttrain.types import ExecLimits


def test_python_snippet_exact_output(py):
    r = py("print(6 * 7)")
    assert (r.status, r.exit_code, r.stdout, r.stderr) == ("ok", 0, "42\n", "")


def test_python_dash_c_with_argv(exec_):
    r = exec_(["python3", "-c", "import sys; print(sys.argv)", "a", "b"])
    assert (r.status, r.stdout) == ("ok", "['-c', 'a', 'b']\n")


def test_shell_command_exact_output(exec_):
    r = exec_(["sh", "-c", "echo hi; echo err >&2; exit 0"])
    assert (r.status, r.stdout, r.stderr) == ("ok", "hi\n", "err\n")


def test_stdin_passes_through(exec_):
    r = exec_(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin="abc")
    assert (r.status, r.stdout) == ("ok", "ABC\n")


def test_nonzero_exit_is_reported(exec_):
    r = exec_(["python3", "-c", "import sys; sys.exit(3)"])
    assert (r.status, r.exit_code, r.signal) == ("nonzero_exit", 3, None)


def test_uncaught_exception_traceback_names_the_script(py):
    r = py("def f():\n    raise ValueError('boom')\nf()\n")
    assert r.status == "nonzero_exit" and r.exit_code == 1
    assert r.stderr.startswith("Traceback") and 'File "/work/main.py", line 2, in f' in r.stderr
    assert r.stderr.endswith("ValueError: boom\n")


def test_wall_timeout(exec_):
    r = exec_(["python3", "-c", "while True: pass"], limits=ExecLimits(wall_s=0.5))
    assert r.status == "timeout" and r.signal == 9  # killed by the wall limit (no wall-clock bound: load varies)


def test_cpu_limit_reports_timeout(exec_):
    r = exec_(["python3", "-c", "while True: pass"], limits=ExecLimits(cpu_s=0.3, wall_s=20))
    assert r.status == "timeout" and "CPU" in r.error and r.wall_s < 15


def test_memory_limit_reports_oom(exec_):
    r = exec_(["python3", "-c", "x = bytearray(400 << 20)"], limits=ExecLimits(memory_mb=128))
    assert r.status == "oom" and r.exit_code != 0 and r.peak_memory_bytes <= 200 << 20


def test_files_changed_have_sha256(exec_):
    src = "open('a.txt', 'w').write('hi'); import os; os.remove('gone.txt'); open('keep.txt', 'a').write('!')"
    r = exec_(["python3", "-c", src], files={"gone.txt": "x", "keep.txt": "k"})
    changes = {c.path: (c.change, c.size, c.sha256[:8]) for c in r.files_changed}
    assert changes == {"a.txt": ("added", 2, "8f434346"), "gone.txt": ("deleted", 0, ""), "keep.txt": ("modified", 2, "beb30569")}


def test_read_files_returns_only_requested(exec_):
    r = exec_(["sh", "-c", "echo one > a; echo two > b"], read_files=["a"])
    assert dict(r.files) == {"a": "one\n"}


def test_result_records_image_limits_and_mechanisms(exec_):
    lim = ExecLimits(wall_s=3, memory_mb=100)
    r = exec_(["true"], limits=lim)
    assert r.image_digest.startswith("sha256:") and r.limits == lim
    assert set(r.enforcement) == {"wall_s", "cpu_s", "memory_mb", "pids", "fsize_mb", "nofile", "output_bytes", "workspace_mb"}


def test_same_program_same_result(exec_):
    src = "import os, sys; print(hash('abc'), sorted(os.environ.items()), sys.flags.hash_randomization)"
    a, b = exec_(["python3", "-c", src]), exec_(["python3", "-c", src])
    assert a.status == "ok" and a.stdout == b.stdout and "PYTHONHASHSEED" in a.stdout
