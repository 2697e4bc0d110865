"""Adversarial: python_tests ships its runner precompiled (`python3 runner.pyc`). An answer
that rewrites that file, or plants a fake runner or results anywhere, changes nothing for
the answers judged after it on the same warm slot; and the sandbox runs a .pyc exactly as
CPython does (a wrong magic number is refused, not run)."""

from __future__ import annotations

import asyncio
import importlib.util
import marshal
import subprocess
import sys

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.tasks import generate_domain
from posttrain.types import Trajectory, Turn
from posttrain.verifiers.code_tests import runner_pyc
from posttrain.verifiers.run import VerifierRunner

TASK = generate_domain("code", 1, seed=3)[0]
M, C = TASK.metadata["m"], TASK.metadata["c"]

# A runner that reports every test as passed with the value the task wants, written over
# runner.pyc, into /tmp and /dev/shm, and as a sitecustomize, for whoever comes next.
FAKE = "import sys\nsys.stdout.write('@@RESULT@@' + open('/work/expected').read())\n"
PLANT = f'''
import importlib.util, marshal, os
pyc = importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(compile({FAKE!r}, "runner.py", "exec"))
for d in ("/work", "/tmp", "/dev/shm"):
    for name in ("runner.pyc", "sitecustomize.py", "expected"):
        try:
            open(os.path.join(d, name), "wb").write(pyc if name.endswith("pyc") else b"print(1)")
        except OSError:
            pass
r = x * {M} + {C}
'''


def _traj(text: str, sample: int = 0) -> Trajectory:
    return Trajectory(TASK.id, TASK.version, TASK.domain, (), (Turn("assistant", text),), finish_reason="stop", sample=sample)


def _as_expr(code: str) -> str:
    return f"(lambda g: exec({code!r}, g) or g['r'])({{'x': x}})"


@pytest.fixture(scope="module")
def scores():
    """Planter, then a wrong answer, then the planter again and a right one: one slot, in order."""

    async def go():
        pool = SandboxPool(concurrency=1, mode="pooled")
        try:
            runner = VerifierRunner(pool)
            seq = [_as_expr(PLANT), f"x*{M}+{C + 1}", _as_expr(PLANT), f"x*{M}+{C}"]
            return [(await runner.verify_one(TASK, _traj(a))).verify for a in seq]
        finally:
            await pool.close()

    return asyncio.run(go())


def test_a_planted_runner_changes_no_later_verdict(scores):
    assert [r.score for r in scores] == [1.0, 0.0, 1.0, 1.0]
    assert all(r.status == "ok" for r in scores)


def test_the_shipped_runner_is_this_interpreters_bytecode():
    blob = runner_pyc()
    assert blob[:4] == importlib.util.MAGIC_NUMBER and marshal.loads(blob[16:]).co_filename == "runner.py"


def test_a_pyc_with_a_wrong_magic_number_is_refused_like_cpython(tmp_path):
    bad = b"\0\0\r\n" + bytes(12) + marshal.dumps(compile("print('ran')", "x.py", "exec"))
    (tmp_path / "x.pyc").write_bytes(bad)
    host = subprocess.run([sys.executable, "-I", str(tmp_path / "x.pyc")], capture_output=True, text=True)

    async def go():
        pool = SandboxPool(concurrency=1, mode="pooled")
        try:
            return await pool.exec(["python3", "x.pyc"], files={"x.pyc": bad})
        finally:
            await pool.close()

    r = asyncio.run(go())
    assert (r.status, r.stdout) == ("nonzero_exit", "") and "Bad magic number" in r.stderr, r
    assert host.returncode == r.exit_code and "Bad magic number" in host.stderr
