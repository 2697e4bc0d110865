"""The test phase of an image task: the task's tests run on the episode's final workspace.

    res, reward = await run_image_tests(image, final_ws_dir, {"test.sh": ...}, wall_s=60)

Tests enter only now, after the candidate has finished, from outside its reach:
- a new sandbox on a *pristine* overlay of the image: anything the episode changed
  outside its workspace (a planted /usr/bin/python3, /etc/ld.so.preload, a doctored
  PATH or shell function, a background process) does not exist here;
- the workspace is a copy of the episode's final one, bound at the image's WORKDIR;
- the tests are bound read-only at /tests from a host directory the episode never saw;
- /logs/verifier is a fresh host directory: a reward.txt the episode planted cannot be
  there, and the reward is read host-side (no symlink followed) only after every process
  of the test sandbox is dead.
A test script must write its reward last (Harbor's convention): a process of the
candidate's code that the test runs could write the file earlier, never after.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

from posttrain.errors import SandboxError
from posttrain.sandbox.images import Image
from posttrain.sandbox.runtime import workspace_root
from posttrain.sandbox.bwrap import run_as
from posttrain.sandbox.session import ShellSession
from posttrain.sandbox.workspace import Workspace, clean_relpath
from posttrain.types import ExecLimits, ExecResult

REWARD = "reward.txt"


def _tests_dir(tests: Mapping[str, str]) -> Path:
    d = Path(tempfile.mkdtemp(prefix="pt-tests-", dir=workspace_root()))
    os.chmod(d, 0o755)
    for rel, text in tests.items():
        p = d / clean_relpath(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        os.chmod(p, 0o755 if rel.endswith(".sh") else 0o644)
    return d


async def run_image_tests(
    image: Image, workspace: Path, tests: Mapping[str, str], wall_s: float = 60.0, memory_mb: int = 1024,
    cmd: str = "bash /tests/test.sh",
) -> tuple[ExecResult, str | None]:  # fmt: skip
    """(the test command's result, the text of /logs/verifier/reward.txt or None)."""
    if image.rootfs is None:
        raise SandboxError(f"image {image.digest} is not a rootfs image: its tests run with the harbor_test verifier")
    tdir = _tests_dir(tests)
    logs = Workspace.create(workspace_root(), run_as())
    binds = ("--ro-bind", str(tdir), "/tests", "--bind", str(logs.path), "/logs/verifier")
    s = ShellSession(image, ExecLimits(wall_s=wall_s, cpu_s=wall_s, memory_mb=memory_mb, output_bytes=1 << 20),
                     max_steps=1, time_budget_s=wall_s + 30, workspace_from=workspace, extra_binds=binds)
    try:
        await s.start()
        try:
            res = await s.run(cmd, timeout=wall_s)
        finally:
            await s.close()  # every process of the test sandbox is dead before the reward is read
        try:
            reward = logs.read(REWARD, limit=4096).decode(errors="replace")
        except SandboxError:
            reward = None
        return res, reward
    finally:
        logs.remove()
        Workspace(tdir, None).remove()
