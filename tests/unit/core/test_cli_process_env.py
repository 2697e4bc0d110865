"""What the `posttrain` command sets in its own process before any library reads it (cli/main.py):
oneDNN's primitive cache bounded to 64 shapes (the RL update's shapes change every step, so the
default 1,024 only grows the heap), unless the user set their own."""

import os
import subprocess
import sys

PROBE = "import os, posttrain.cli.main; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"


def _capacity(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_command_bounds_onednns_primitive_cache():
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    assert _capacity(env) == "64"


def test_a_users_own_primitive_cache_capacity_wins():
    assert _capacity({**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "512"}) == "512"
