"""Ctrl-Z on a local multi-rank job (parallel/job_control.py): every rank stops with the launcher,
`fg` continues them, and a pause longer than trainer.timeout_s does not end the job.

The terminal's part is played by hand: Ctrl-Z is SIGTSTP to the foreground process group (the
launcher's: it is started as a group of its own, whose parent, this test, is in the same session,
so the kernel does not drop its stop as it would for an orphaned group), `fg` is SIGCONT to it.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.train.sharded.sft_case import sft_case

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields from the state on (the name may hold spaces): [state, ppid, ...]."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _ranks(launcher: int) -> list[int]:
    """The launcher's children: its ranks."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int(_stat(int(d.name))[1]) == launcher:
                found.append(int(d.name))
        except (OSError, IndexError):
            pass  # a process that ended while we looked
    return sorted(found)


def _state(pid: int) -> str:
    return _stat(pid)[0]


def _alive(pid: int) -> bool:
    try:
        return _state(pid) != "Z"
    except OSError:  # gone, and reaped
        return False


def _cpu_ticks(pid: int) -> int:
    f = _stat(pid)
    return int(f[11]) + int(f[12])  # utime + stime (fields 14 and 15 of the whole line)


def _until(cond, timeout_s: float, what) -> None:
    """Wait for `cond()`; `what`: the failure's message, or a function that says it then."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.02)


@contextlib.contextmanager
def _job(cmd: list[str], tmp_path: Path):
    """The launcher, started as the terminal's foreground group would hold it; on the way out (a
    failed assertion) it and its ranks are killed, stopped or not: SIGKILL ends a stopped process."""
    # Output to files: a stopped reader must not block the ranks on a full pipe, nor vice versa.
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        launcher = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, process_group=0)
    launcher.ranks = []  # filled by _suspend: the ranks to kill should the launcher be gone already
    try:
        yield launcher
    finally:
        live = launcher.poll() is None
        for pid in {*launcher.ranks, *(_ranks(launcher.pid) if live else ())}:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if live:
            launcher.kill()
            launcher.wait()


def _thread_states(pid: int) -> str:
    """The states of every thread of `pid` ('' once it is gone)."""
    states = []
    for t in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            states.append((t / "stat").read_text().rsplit(")", 1)[1].split()[0])
    return "".join(sorted(states))


def _suspend(launcher: subprocess.Popen, n: int) -> list[int]:
    """Ctrl-Z; returns the ranks once the launcher and all `n` of them are stopped (state T). The
    launcher stops last: once it shows T, every thread of every rank has stopped already (the kernel
    counts a process stopped only then, and `kill -9` on the job relies on it)."""
    ranks = launcher.ranks = _ranks(launcher.pid)
    assert len(ranks) == n, ranks
    os.killpg(launcher.pid, signal.SIGTSTP)
    _until(lambda: _state(launcher.pid) == "T", 10, lambda: f"the launcher did not stop: {_state(launcher.pid)}")
    threads = {p: _thread_states(p) for p in ranks}
    assert all(set(s) == {"T"} for s in threads.values()), f"the launcher stopped before its ranks: {threads}"
    return ranks


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_z_stops_every_rank_and_fg_finishes_the_run(tmp_path):
    steps = 60  # a 2-rank tiny step is ~0.2 s: Ctrl-Z after the first logged step lands mid-run, with ~12 s to spare under load
    cfg_file, over = sft_case(tmp_path)
    over = [o for o in over if not o.startswith("sft.steps")] + [f"sft.steps={steps}", "sft.checkpoint_every=100"]
    out = tmp_path / "run"
    metrics = out / "metrics.jsonl"
    with _job([sys.executable, "-m", "posttrain.cli.main", "sft", str(cfg_file), *over, "trainer.world_size=2",
               "--out", str(out)], tmp_path) as launcher:
        _until(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 1, 240, "no step logged")
        ranks = _suspend(launcher, 2)
        logged, ticks = metrics.read_text(), [_cpu_ticks(p) for p in ranks]
        time.sleep(1.5)  # stopped means stopped: no CPU, no step
        assert [_cpu_ticks(p) for p in ranks] == ticks
        assert all(_state(p) == "T" for p in [launcher.pid, *ranks])
        assert metrics.read_text() == logged and logged.count("\n") < steps  # suspended mid-run
        os.killpg(launcher.pid, signal.SIGCONT)  # fg
        assert launcher.wait(timeout=240) == 0, (tmp_path / "err.txt").read_text()[-2000:]
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == list(range(steps))


def _idle_job(tmp_path: Path, timeout_s: float):
    """A launcher (run_ranks) of 2 rank_idle.py ranks (`_job`)."""
    launch = (f"import sys; from posttrain.parallel.launch import run_ranks; sys.exit(run_ranks([sys.executable, "
              f"{str(HERE / 'rank_idle.py')!r}, {str(tmp_path)!r}], 2, {timeout_s}, env={{'OMP_NUM_THREADS': '1'}}))")
    return _job([sys.executable, "-c", launch], tmp_path)


def _both_ready(tmp_path: Path) -> None:
    ready = lambda: (tmp_path / "ready0").exists() and (tmp_path / "ready1").exists()  # noqa: E731
    _until(ready, 240, "the ranks did not start")


@pytest.mark.extended  # make test-extended: a slow check make test leaves out (docs/benchmarks.md)
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_pause_longer_than_the_timeout_does_not_fail_the_job(tmp_path):
    """Suspended while rank 0 works alone (the follower waits for its next command, watching rank 0's
    heartbeat) for longer than timeout_s: after `fg` the follower must not give up on rank 0."""
    timeout_s, pause_s = 5.0, 9.0
    with _idle_job(tmp_path, timeout_s) as launcher:
        _both_ready(tmp_path)
        time.sleep(1.5)  # heartbeats flowing both ways
        _suspend(launcher, 2)
        time.sleep(pause_s)
        os.killpg(launcher.pid, signal.SIGCONT)  # fg
        time.sleep(2.0)  # a follower that counted the pause gives up within a second (it checks every 0.05 s)
        (tmp_path / "go").touch()  # rank 0's command: an all-reduce that needs the follower
        code = launcher.wait(timeout=120)
    err = (tmp_path / "err.txt").read_text()
    assert code == 0 and "error" not in err, err[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ranks_stopped_by_ctrl_z_end_with_a_killed_launcher(tmp_path):
    """`kill -9 %1` on the suspended job: a stopped rank holds its parent-death SIGTERM pending; the
    kernel's SIGHUP + SIGCONT to a group orphaned with stopped members (each rank's, once it is
    reparented to init) is what ends it."""
    with _idle_job(tmp_path, 60.0) as launcher:
        _both_ready(tmp_path)
        ranks = _suspend(launcher, 2)
        launcher.kill()
        launcher.wait()
        _until(lambda: not any(_alive(p) for p in ranks), 10,
               lambda: f"ranks left behind: {[(p, _state(p)) for p in ranks if _alive(p)]}")
