"""Claiming a run directory: a new run never mixes its files with an earlier run's.

    run_dir = claim_run_dir(path, resume=False, overwrite=False)

Three runs into one directory used to leave config.yaml from the third, summary.json from
the first and metrics.jsonl from the second. Now a training command refuses a non-empty
directory unless it is resuming it or was told to overwrite it. `--overwrite` empties
only a directory that looks like a run (it holds config.yaml), so a typo in --out never
deletes an unrelated folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from posttrain.errors import ConfigError
from posttrain.store.run import CONFIG, RunDir


def claim_run_dir(path: str | Path, resume: bool = False, overwrite: bool = False, command: str = "posttrain rl",
                  resumable: bool = True) -> Path:
    """The directory, ready for this run; ConfigError (one line) when it holds another run.
    `resumable`: whether `command` has --resume, so the refusal suggests only what exists."""
    d = Path(path)
    if resume:
        if not RunDir(d).is_run():
            raise ConfigError(f"--resume {d}: not a run directory (no {CONFIG})")
        return d
    if d.exists() and not d.is_dir():
        raise ConfigError(f"--out {d}: exists and is not a directory")
    if d.is_dir() and any(d.iterdir()):
        if not overwrite:
            how = (f"continue it with `{command} --resume {d}`, or pass --overwrite to replace it" if resumable
                   else f"`{command}` does not resume: pass --overwrite to replace it, or choose another --out")
            raise ConfigError(f"--out {d} is not empty (an earlier run?); {how}")
        if not RunDir(d).is_run():
            raise ConfigError(f"--overwrite {d}: refusing to empty a directory that is not a run directory (no {CONFIG})")
        shutil.rmtree(d)
    d.mkdir(parents=True, exist_ok=True)
    return d


def newest_checkpoint(run_dir: str | Path) -> tuple[int, Path] | None:
    """(step, path) of the newest `checkpoints/step-N`, or None."""
    return RunDir(run_dir).newest_checkpoint()


def interrupted_message(run_dir: str | Path, command: str) -> str:
    """What an interrupted run tells its user: where the work is and how to continue."""
    ck = newest_checkpoint(run_dir)
    where = f"newest checkpoint {ck[1]} (step {ck[0]})" if ck else f"no checkpoint yet; finished phases are kept in {run_dir}"
    return f"interrupted: {where}; resume with: {command} --resume {run_dir}"


def resume_message(run_dir: str | Path) -> str:
    ck = newest_checkpoint(run_dir)
    if ck is None:
        return f"resuming {run_dir}: no checkpoint yet, finished phases are reused and training starts at step 0"
    return f"resuming {run_dir} from checkpoint step {ck[0]} ({ck[1]})"
