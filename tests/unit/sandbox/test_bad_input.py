"""Bad requests get a clear error (naming the bad input), never a hang or a host change."""

from __future__ import annotations

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxPool
from posttrain.types import ExecLimits


def test_nonexistent_command_is_a_clear_127(exec_):
    r = exec_(["no-such-command-xyz", "arg"])
    assert (r.status, r.exit_code) == ("nonzero_exit", 127) and "no-such-command-xyz" in r.error


def test_binary_file_as_script(exec_):
    r = exec_(["python3", "blob.py"], files={"blob.py": bytes(range(256)) * 4})
    assert r.status == "nonzero_exit" and r.exit_code == 1 and "SyntaxError" in r.stderr


def test_binary_file_as_executable(exec_):
    r = exec_(["./blob"], files={"blob": b"\x00\x01\x02garbage"})
    assert r.status == "nonzero_exit" and r.exit_code == 127 and "./blob" in r.error


@pytest.mark.parametrize("image", ["sha256:nothex!", "sha256:" + "0" * 64, "", "../../etc"])
def test_invalid_image_digest(run, image):
    with pytest.raises(SandboxError, match="image"):
        run(SandboxPool().exec, ["true"], image=image)


@pytest.mark.parametrize("field", ["wall_s", "cpu_s", "memory_mb", "pids", "output_bytes", "workspace_mb"])
def test_negative_limits(run, field):
    with pytest.raises(SandboxError, match=field):
        run(SandboxPool().exec, ["true"], limits=ExecLimits(**{field: -1}))


@pytest.mark.parametrize("cmd", [[], "echo hi", [""], ["echo", None]])
def test_bad_command_shape(run, cmd):
    with pytest.raises(SandboxError, match="command"):
        run(SandboxPool().exec, cmd)


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", ""])
def test_file_paths_outside_workspace(run, path):
    with pytest.raises(SandboxError, match="path"):
        run(SandboxPool().exec, ["true"], files={path: "x"})


def test_closed_pool_refuses(run):
    pool = SandboxPool()
    run(pool.close)
    with pytest.raises(SandboxError, match="closed"):
        run(pool.exec, ["true"])
