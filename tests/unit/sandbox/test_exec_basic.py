"""Control tests: correct programs succeed with exact output; statuses map correctly."""

from __future__ import annotations

from posttrain.types import ExecLimits


def test_python_snippet_exact_output(exec_):
    r = exec_(["python3", "main.py"], files={"main.py": "print(6 * 7)"})
    assert (r.status, r.exit_code, r.stdout, r.stderr) == ("ok", 0, "42\n", "")


def test_stdin_passes_through(exec_):
    r = exec_(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin="abc")
    assert (r.status, r.stdout) == ("ok", "ABC\n")


def test_nonzero_exit_is_reported(exec_):
    r = exec_(["python3", "-c", "import sys; sys.exit(3)"])
    assert (r.status, r.exit_code, r.signal) == ("nonzero_exit", 3, None)


def test_wall_timeout(exec_):
    r = exec_(["python3", "-c", "while True: pass"], limits=ExecLimits(wall_s=0.5))
    assert r.status == "timeout" and r.signal == 9 and r.wall_s < 3


def test_memory_limit_reports_oom(exec_):
    r = exec_(["python3", "-c", "x = bytearray(400 << 20)"], limits=ExecLimits(memory_mb=128))
    assert r.status == "oom" and r.exit_code != 0


def test_files_changed_have_sha256(exec_):
    src = "open('a.txt', 'w').write('hi'); import os; os.remove('gone.txt'); open('keep.txt', 'a').write('!')"
    r = exec_(["python3", "-c", src], files={"gone.txt": "x", "keep.txt": "k"})
    changes = {c.path: (c.change, c.size, c.sha256[:8]) for c in r.files_changed}
    assert changes == {"a.txt": ("added", 2, "8f434346"), "gone.txt": ("deleted", 0, ""), "keep.txt": ("modified", 2, "beb30569")}
