"""Shared fixtures: one event loop and one pool per mode for the whole sandbox test session.

`exec_` is parametrised over both execution modes, so every adversarial property is
checked for warm (pooled zygote) and fresh-bwrap executions alike.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.sandbox.runtime import SANDBOX_HOST_ID


@pytest.fixture(scope="session")
def runner():
    with asyncio.Runner() as r:
        yield r


@pytest.fixture(scope="session")
def pools(runner):
    made: dict[str, SandboxPool] = {}

    def get(mode: str) -> SandboxPool:
        if mode not in made:
            made[mode] = SandboxPool(concurrency=2, mode=mode)
        return made[mode]

    yield get
    for p in made.values():
        runner.run(p.close())


@pytest.fixture()
def run(runner):
    """run(async_fn, *args) on the shared loop."""

    def _run(fn, *args, **kwargs):
        return runner.run(fn(*args, **kwargs))

    return _run


@pytest.fixture(params=["pooled", "fresh"])
def mode(request):
    return request.param


@pytest.fixture()
def exec_(runner, pools, mode):
    """exec_(cmd, **kw) -> ExecResult in the parametrised mode."""

    def _exec(cmd, **kw):
        return runner.run(pools(mode).exec(cmd, **kw))

    return _exec


@pytest.fixture()
def py(exec_):
    """py(src, **kw): run a Python program saved as main.py."""

    def _py(src, **kw):
        files = {"main.py": src, **kw.pop("files", {})}
        return exec_(["python3", "main.py"], files=files, **kw)

    return _py


@pytest.fixture()
def uid_procs():
    """uid_procs() -> host pids running as the sandbox's host uid."""
    return sandbox_uid_processes


def sandbox_uid_processes() -> list[int]:
    """Host pids running as the sandbox uid (what a leak would leave behind)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == SANDBOX_HOST_ID:
                    out.append(int(d))
            except OSError:
                pass
    return out


IMAGE_CTX = os.path.join(os.path.dirname(__file__), "image_ctx")


@pytest.fixture(scope="session")
def debian_image():
    """A small Debian bookworm image (python3, git, jq, make, procps), built once into the image cache.

    Cold it takes about a minute and a half (mmdebstrap + one apt layer); later sessions reuse it in
    well under a second. Skipped only where it cannot be built: no mmdebstrap, or not root."""
    import shutil

    from posttrain.sandbox.rootfs_build import build_rootfs

    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is not installed (apt-get install -y mmdebstrap; `make install` does it)")
    if os.geteuid() != 0:
        pytest.skip("building a Debian image runs its RUN layers as real root; not root here")
    return build_rootfs(os.path.join(IMAGE_CTX, "Dockerfile"))
