"""posttrain/testing/cli_fork.py: a forked command is the cold command, run in its own process."""

import os
import subprocess

import pytest

from posttrain.testing.cli_fork import run_cli

PROBE = '''
import os, sys, time
print("cwd", os.getcwd(), "probe", os.environ.get("CLI_FORK_PROBE"), "pid", os.getpid(), flush=True)
print("to stderr", file=sys.stderr)
from posttrain.registry import verifier
from posttrain.types import VerifyResult
try:
    @verifier("cli_fork_probe", answer_format="line")
    class Probe:
        async def __call__(self, task, traj, ctx):
            return VerifyResult(1.0, True)
except Exception as e:  # registered already: the registry outlived a process, which must not happen
    print("ALREADY REGISTERED", e, file=sys.stderr)
time.sleep(float(os.environ.get("CLI_FORK_SLEEP", "0")))
'''


@pytest.fixture()
def probe(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    return ["tasks", "validate", "missing.jsonl", "--plugin", str(tmp_path / "probe.py")]


def _env(**extra):
    return {**os.environ, **extra}


def test_forked_and_cold_commands_print_the_same_and_exit_the_same(tmp_path, probe):
    forked = run_cli(probe, cwd=tmp_path, env=_env(CLI_FORK_PROBE="x"))
    cold = run_cli(probe, cwd=tmp_path, env=_env(CLI_FORK_PROBE="x"), cold=True)
    assert forked.returncode == cold.returncode == 2
    pid = forked.stdout.split()[-1]
    assert forked.stdout.replace(pid, "PID") == cold.stdout.replace(cold.stdout.split()[-1], "PID")
    assert forked.stderr == cold.stderr and "no such task file" in forked.stderr


def test_the_command_gets_the_callers_cwd_and_environment(tmp_path, probe):
    r = run_cli(probe, cwd=tmp_path, env=_env(CLI_FORK_PROBE="seen"))
    assert r.stdout.startswith(f"cwd {tmp_path} probe seen pid ")


def test_each_command_is_a_new_process_whose_registrations_die_with_it(tmp_path, probe):
    a, b = (run_cli(probe, cwd=tmp_path) for _ in range(2))
    assert a.stdout.split()[-1] != b.stdout.split()[-1] != str(os.getpid())
    assert "ALREADY REGISTERED" not in a.stderr + b.stderr


def test_a_command_past_its_timeout_is_killed_and_raises_like_subprocess_run(tmp_path, probe):
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli(probe, cwd=tmp_path, env=_env(CLI_FORK_SLEEP="60"), timeout=3)
    r = run_cli(probe, cwd=tmp_path)  # the server goes on serving
    assert r.returncode == 2
