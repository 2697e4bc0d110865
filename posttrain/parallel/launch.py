"""`trainer.world_size=N`: start N ranks of the same command, as torchrun would, and fail fast.

    posttrain sft cfg.yaml trainer.world_size=2       # the CLI re-runs itself as 2 ranks
    torchrun --nproc-per-node 2 -m posttrain sft cfg.yaml   # the same, launched by torchrun

`maybe_spawn(argv, launchers)` is called by the CLI before anything else (no torch import): when the
command line (or the config YAML it names) asks for world_size > 1 and this process is not
already a rank, it runs `python -m posttrain ARGV` N times with RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT and POSTTRAIN_TIMEOUT_S set, and watches them. When a
rank exits non-zero or is killed, the others are stopped and one line names it:

    posttrain: error: rank 1 of 2 was killed by signal SIGKILL; stopped the other ranks

A rank that hangs is caught inside the job (group.py: heartbeats, collective timeouts).
Ctrl-C reaches this process alone (the ranks run in their own process group) and is handed to
rank 0, which checkpoints with the other ranks alive, then ends the job (exit 130). Ctrl-Z stops
every rank, then this process; `fg`/`bg` continues them (job_control.py). `--resume RUN`
reads the launch settings from the run's config file (overrides still win).

With `trainer.launcher=ray` the other ranks are Ray actors on the cluster instead
(distributed/trainer_group.py) and this process is rank 0: Ctrl-Z stops rank 0 alone, and the
actors wait for it up to `trainer.timeout_s`. Under torchrun (which starts each rank in a session
of its own) Ctrl-Z stops torchrun alone and the ranks train on.

Limits: the local launcher is for one machine (for several nodes use torchrun's own
rendezvous, or `trainer.launcher=ray`); the YAML is only peeked for the launch settings
(`trainer.world_size/timeout_s/launcher/rank_cpus/rank_gpus`, `cluster.address`), not
merged with a recipe's preset.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from posttrain.parallel.rank_parent import LAUNCHER_PID


DEFAULT_TIMEOUT_S = 300.0
TRAINING_COMMANDS = ("sft", "dpo", "rl", "quickstart")  # the commands that train; others ignore world_size


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PEEKED = {"trainer": ("world_size", "timeout_s", "launcher", "rank_cpus", "rank_gpus"), "cluster": ("address",)}


def _peek(argv: Sequence[str], run_config: Path | None = None) -> dict[str, str]:
    """`section.key` -> value for the launch settings, from `section.key=` overrides, else from
    the first YAML argument, else from `run_config` (a resumed run's config file; not merged with
    a recipe's preset)."""
    found: dict[str, str] = {}
    for a in argv:
        for sec, keys in _PEEKED.items():
            for key in keys:
                if a.startswith(f"{sec}.{key}="):
                    found[f"{sec}.{key}"] = a.split("=", 1)[1]
    yaml_path = next((a for a in argv if a.endswith((".yaml", ".yml")) and Path(a).is_file()), None)
    if yaml_path is None and run_config is not None and run_config.is_file():  # `--resume RUN`: the run's own
        yaml_path = str(run_config)
    if yaml_path:
        import yaml

        try:
            doc = yaml.safe_load(Path(yaml_path).read_text()) or {}
        except Exception:  # noqa: BLE001 - a broken YAML is reported by load_config, with its name
            doc = {}
        for sec, keys in _PEEKED.items():
            part = doc.get(sec) if isinstance(doc, dict) else None
            for key in keys:
                if isinstance(part, dict) and part.get(key) is not None:
                    found.setdefault(f"{sec}.{key}", str(part[key]))
    return found


def _trainer_settings(argv: Sequence[str], run_config: Path | None = None) -> tuple[int, float]:
    """(world_size, timeout_s) of the command line."""
    found = _peek(argv, run_config)
    try:
        return int(found.get("trainer.world_size", 1)), float(found.get("trainer.timeout_s", DEFAULT_TIMEOUT_S))
    except ValueError:
        return 1, DEFAULT_TIMEOUT_S  # load_config names the bad value


Launcher = Callable[[Sequence[str], int, float, Mapping[str, str]], Any]


def maybe_spawn(argv: Sequence[str], launchers: Mapping[str, Launcher], run_config: Path | None = None) -> None:
    """Start this command's other ranks, if it asks for world_size N > 1, through the
    `trainer.launcher` it names, one of `launchers` (the CLI wires them: parallel/ knows no
    cluster): `local` (default, `launch_local`) re-runs it as N processes here and exits with
    the job's status; `ray` (distributed/trainer_group.py) starts ranks 1..N-1 as Ray actors
    and returns with this process as rank 0. `run_config`: the config file of the run that
    `--resume RUN` continues (the CLI finds it), read when the command line names no YAML."""
    if "WORLD_SIZE" in os.environ or "--help" in argv or not argv or argv[0] not in TRAINING_COMMANDS:
        return
    n, timeout_s = _trainer_settings(argv, run_config)
    if n <= 1:
        return
    found = _peek(argv, run_config)
    from posttrain.errors import ConfigError, PosttrainError

    try:
        name = found.get("trainer.launcher", "local")
        if name not in launchers:
            raise ConfigError(f"unknown trainer.launcher {name!r}; known: {', '.join(sorted(launchers))}")
        launchers[name](argv, n, timeout_s, found)
    except PosttrainError as e:  # an unknown launcher, no cluster.address, an unreachable cluster
        print(f"posttrain: error: {e}", file=sys.stderr)
        sys.exit(2)
    import atexit

    from posttrain.parallel.group import release_followers
    from posttrain.parallel.mesh import init_group

    init_group(timeout_s)  # the rendezvous with the ranks just started
    atexit.register(release_followers, timeout_s)


def launch_local(argv: Sequence[str], world: int, timeout_s: float, settings: Mapping[str, str]) -> None:
    """N processes of this command line on this machine; exits with the job's status."""
    sys.exit(run_ranks([sys.executable, "-m", "posttrain", *argv], world, timeout_s))


def run_ranks(cmd: Sequence[str], world_size: int, timeout_s: float = DEFAULT_TIMEOUT_S,
              env: dict[str, str] | None = None, poll_s: float = 0.2) -> int:
    """Start `cmd` as ranks 0..N-1; return 0, or the failing rank's code after stopping the rest.

    The ranks get a process group of their own, so a terminal's Ctrl-C reaches this process only,
    which hands it to rank 0 alone: rank 0 finishes its step and checkpoints with the other ranks
    still alive (train/supervised_checkpoint.py, the RL loop's save), then exits 130 and the job
    ends with 130. A second Ctrl-C is handed on too (rank 0 stops at once), and the ranks are stopped.
    Ctrl-Z stops every rank's process group and then this process; `fg`/`bg` continues them (job_control.py)."""
    from posttrain.parallel.job_control import JobControl

    port = _free_port()
    procs: list[subprocess.Popen] = []
    with JobControl(procs) as jc:  # before the first start: a Ctrl-Z now stops the ranks started so far
        for r in range(world_size):
            e = {**os.environ, **(env or {}), "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(world_size),
                 "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                 "POSTTRAIN_TIMEOUT_S": str(timeout_s), LAUNCHER_PID: str(os.getpid())}
            e.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world_size)))
            procs.append(subprocess.Popen(list(cmd), env=e, process_group=0))
        interrupts = 0
        while True:
            try:
                code = _job_status(procs, interrupted=interrupts > 0, note=jc.pause_note(timeout_s))
                if code is not None:
                    return code
                time.sleep(poll_s)
            except KeyboardInterrupt:
                interrupts += 1
                if procs[0].poll() is None:
                    procs[0].send_signal(signal.SIGINT)
                if interrupts > 1:
                    _stop(procs)
                    return 130


def _job_status(procs: Sequence[subprocess.Popen], interrupted: bool, note: str = "") -> int | None:
    """None while the job runs; 0 once every rank is done; else the failing rank's code, the rest
    stopped and the rank named (`note` appended), except rank 0 leaving with 130 after a Ctrl-C (it said why)."""
    codes = [p.poll() for p in procs]
    bad = next((r for r, c in enumerate(codes) if c not in (None, 0)), None)
    if bad is None:
        return 0 if all(c == 0 for c in codes) else None
    if interrupted and bad == 0 and codes[0] == 130:
        _stop(procs[1:], wait_first_s=5.0)  # the followers are leaving: rank 0 stopped them on its way out
        return 130
    _stop(procs)
    c = codes[bad]
    how = f"was killed by signal {signal.Signals(-c).name}" if c < 0 else f"exited with status {c}"
    print(f"posttrain: error: rank {bad} of {len(procs)} {how}; stopped the other ranks{note}", file=sys.stderr,
          flush=True)
    return c if c > 0 else 1


def _stop(procs: Sequence[subprocess.Popen], grace_s: float = 5.0, wait_first_s: float = 0.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`; `wait_first_s`: time to leave on their own first."""
    deadline = time.monotonic() + wait_first_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
