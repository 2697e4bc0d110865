"""Sessions: state carries across steps; files, snapshots, budgets, timeouts, closing."""

from __future__ import annotations

import errno
import os

import pytest

from posttrain.errors import SandboxError
import posttrain.sandbox.session as session_mod
from posttrain.sandbox.runtime import workspace_root
from posttrain.sandbox.session import BudgetExceeded
from posttrain.types import ExecLimits


@pytest.fixture()
def session(runner, pools):
    """session(**kw) -> an open session on the shared pool, closed at teardown."""
    opened = []

    def _open(**kw):
        s = runner.run(pools("pooled").open_session(**kw))
        opened.append(s)
        return s

    yield _open
    for s in opened:
        runner.run(s.close())


def test_cwd_env_and_files_persist(run, session):
    s = session()
    run(s.run, "mkdir sub && cd sub && export X=41 && echo hi > f.txt")
    r = run(s.run, "pwd; echo $((X + 1)); cat f.txt")
    assert (r.status, r.stdout) == ("ok", "/work/sub\n42\nhi\n")


def test_write_then_read_file(run, session):
    s = session()
    run(s.write_file, "a/b.txt", "data")
    r = run(s.run, "cat a/b.txt | tr a-z A-Z > out.txt")
    assert r.status == "ok" and run(s.read_file, "out.txt") == b"DATA"


def test_snapshot_and_diff(run, session):
    s = session()
    run(s.write_file, "keep.txt", "1")
    run(s.write_file, "gone.txt", "2")
    snap = run(s.snapshot)
    run(s.run, "rm gone.txt; echo x >> keep.txt; echo new > new.txt")
    changes = {(c.path, c.change) for c in run(s.diff)}
    assert set(snap) == {"keep.txt", "gone.txt"}
    assert changes == {("gone.txt", "deleted"), ("keep.txt", "modified"), ("new.txt", "added")}


def test_step_reports_files_changed(run, session):
    r = run(session().run, "echo hi > x.txt")
    assert [(c.path, c.change, c.size) for c in r.files_changed] == [("x.txt", "added", 3)]


def test_nonzero_exit_and_syntax_error_keep_session(run, session):
    s = session()
    assert run(s.run, "false").status == "nonzero_exit"
    assert run(s.run, "if then fi").status == "nonzero_exit"
    assert run(s.run, "echo alive").stdout == "alive\n"


def test_step_timeout_kills_only_the_step(run, session):
    s = session()
    r = run(s.run, "sleep 30", timeout=0.5)
    assert r.status == "timeout"
    assert run(s.run, "echo still here").stdout == "still here\n"


def test_shell_builtin_loop_terminates_session(run, session):
    s = session()
    r = run(s.run, "while :; do :; done", timeout=0.3)
    assert r.status == "timeout" and "terminated" in r.error
    with pytest.raises(SandboxError, match="closed"):
        run(s.run, "echo x")


def test_step_output_flood_is_cut(run, session):
    s = session(limits=ExecLimits(output_bytes=10_000))
    r = run(s.run, "yes", timeout=10)
    assert r.status == "output_limit" and r.stdout_truncated and len(r.stdout) == 10_000


def test_output_over_the_cap_is_output_limit_even_when_the_command_ends_before_a_poll(run, session):
    """A writer faster than the 20 ms output poll (done in microseconds): the status must not depend
    on whether the poll saw the file grow before the step's end marker arrived."""
    s = session(limits=ExecLimits(output_bytes=10_000))
    r = run(s.run, "head -c 20000 /dev/zero | tr '\\0' x")
    assert r.status == "output_limit" and r.stdout_truncated and len(r.stdout) == 10_000


def test_step_budget(run, session):
    s = session(max_steps=2)
    run(s.run, "true")
    run(s.run, "true")
    with pytest.raises(BudgetExceeded, match="2 steps"):
        run(s.run, "true")


def test_time_budget(run, session):
    s = session(time_budget_s=0.5)
    r = run(s.run, "sleep 5")
    assert r.status == "timeout"
    with pytest.raises(BudgetExceeded, match="time budget"):
        run(s.run, "true")


def test_symlink_read_is_refused(run, session):
    s = session()
    run(s.run, "ln -s /etc/passwd p; ln -s / root")
    for path in ("p", "root/etc/passwd"):
        with pytest.raises(SandboxError):
            run(s.read_file, path)


def test_closed_session_raises(run, session):
    s = session()
    run(s.close)
    for call in (lambda: s.run("true"), lambda: s.read_file("x"), lambda: s.write_file("x", "y"), s.snapshot):
        with pytest.raises(SandboxError, match="closed"):
            run(call)


def test_close_leaves_nothing_behind(run, session):
    s = session()
    run(s.run, "sleep 100 & echo started")
    dirs = [s.ws.path, s.ctl.path, *(s.cg.dirs.values() if s.cg else [])]
    pid = s.launched.proc.pid
    run(s.close)
    assert not any(os.path.exists(d) for d in dirs)
    assert not os.path.exists(f"/proc/{pid}")


def test_a_shell_that_cannot_start_leaves_nothing_behind(run, pools, monkeypatch):
    # fork() under memory or pid pressure fails with EAGAIN after the workspaces and cgroup exist
    cgroup_dirs = []

    def fork_fails(argv_for, stdio, cg, rlimits, **kw):
        cgroup_dirs.extend(cg.dirs.values() if cg else [])
        for fd in stdio:  # the real launch() closes them whatever happens
            os.close(fd)
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    mine = f"ws-{os.getpid()}-"
    before = {d for d in os.listdir(workspace_root()) if d.startswith(mine)}
    monkeypatch.setattr(session_mod, "launch", fork_fails)
    with pytest.raises(OSError, match="temporarily unavailable"):
        run(pools("pooled").open_session)
    assert {d for d in os.listdir(workspace_root()) if d.startswith(mine)} == before
    assert not any(os.path.exists(d) for d in cgroup_dirs)


def test_many_idle_sessions(run, runner, pools):
    async def go(n):
        pool = pools("pooled")
        ss = [await pool.open_session() for _ in range(n)]
        outs = [(await s.run("echo $$")).status for s in ss[:: n // 5]]
        for s in ss:
            await s.close()
        return outs

    assert run(go, 40) == ["ok"] * 5
