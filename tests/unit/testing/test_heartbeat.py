"""tests/heartbeat.py: a run names the test it is in and the memory used, once per interval."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_heartbeat_names_the_running_test_and_the_memory(tmp_path):
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(1.5)\n")
    env = {**os.environ, "PYTEST_HEARTBEAT_S": "0.5", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.heartbeat", "-n", "1",
                        str(tmp_path / "test_slow.py")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    beats = [x for x in r.stderr.splitlines() if x.startswith("[heartbeat ")]
    assert any("GiB used" in b and "test_slow.py::test_sleeps" in b for b in beats), r.stderr
