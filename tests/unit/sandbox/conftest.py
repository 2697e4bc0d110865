"""Shared fixtures: one pool per test module, and a `run` helper for sync tests."""

from __future__ import annotations

import asyncio

import pytest

from posttrain.sandbox import SandboxPool


@pytest.fixture()
def run():
    """run(coro_fn) -> result, each test on its own event loop."""

    def _run(fn, *args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return _run


@pytest.fixture()
def exec_(run):
    """exec_(cmd, **kw) -> ExecResult from a fresh pool, closed afterwards."""

    def _exec(cmd, **kw):
        async def go():
            pool = SandboxPool(concurrency=2, mode=kw.pop("mode", "auto"))
            try:
                return await pool.exec(cmd, **kw)
            finally:
                await pool.close()

        return run(go)

    return _exec
