"""The built-in trackers: tensorboard (the default), wandb (offline), mlflow (local files), trackio.

Each writes inside the run directory, so a run stays one folder that can be copied:
- tensorboard: run_dir/tb (SummaryWriter from torch; `tensorboard --logdir run_dir/tb`);
- wandb: run_dir/wandb, offline mode unless WANDB_MODE says otherwise (`wandb sync` uploads);
- mlflow: run_dir/mlruns, a local file store (`mlflow ui --backend-store-uri run_dir/mlruns`);
- trackio: run_dir/trackio (`TRACKIO_DIR=run_dir/trackio trackio show`).

trackio prints progress lines ("* Trackio project initialized", "* Created new run", dashboard
hints) on stdout; they would land in the middle of a CLI's output, so its calls run with stdout
swallowed. Its warnings go to stderr and stay visible.

Limits: trackio reads its directory once, at first import; a process that opens trackio
runs in two run directories points the library's module globals at the second.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any, Mapping

from posttrain.store.run import RunDir
from posttrain.store.trackers.base import RunInfo, tracker


def _flat(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v if isinstance(v, (int, float, str, bool)) or v is None else str(v)
    return out


def _tag(run: RunInfo, key: str) -> str:
    """SFT and DPO keys get their phase as a prefix (sft/loss); RL keys stay as they were."""
    if not run.phase or run.phase == "rl" or key.startswith(run.phase + "/"):
        return key
    return f"{run.phase}/{key}"


class TensorBoard:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.run = run
        self.writer = SummaryWriter(str(RunDir(run_dir).tensorboard))

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        for k, v in scalars.items():
            self.writer.add_scalar(_tag(self.run, k), v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandB:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        os.environ.setdefault("WANDB_MODE", "offline")  # no network, no login; `wandb sync` later
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        (run_dir / "wandb").mkdir(parents=True, exist_ok=True)
        self.run = run
        self.wb = wandb.init(project=run.project, name=f"{run.name}-{run.phase}" if run.phase else run.name,
                             dir=str(run_dir), config=_flat(run.config), reinit="create_new",
                             settings=wandb.Settings(console="off", x_disable_stats=True))

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        self.wb.log({_tag(self.run, k): v for k, v in scalars.items()}, step=step)

    def close(self) -> None:
        self.wb.finish()


class MLflow:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        # the file store is what the issue asks for (no server, no database); mlflow 3 wants an opt-in
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        self.run = run
        self.client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
        exp = self.client.get_experiment_by_name(run.project)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(run.project)
        self.run_id = self.client.create_run(exp_id, run_name=f"{run.name}-{run.phase}" if run.phase else run.name).info.run_id
        params = _flat(run.config)
        for i in range(0, len(params), 100):  # mlflow's batch limit
            from mlflow.entities import Param

            chunk = list(params.items())[i:i + 100]
            self.client.log_batch(self.run_id, params=[Param(k[:250], str(v)[:500]) for k, v in chunk])

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        # mlflow metric names allow [\w./ -]; posttrain keys like eval/pass@1 carry '@'
        ms = [Metric(_tag(self.run, k).replace("@", "_at_"), float(v), now, step) for k, v in scalars.items()]
        self.client.log_batch(self.run_id, metrics=ms)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class Trackio:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        where = (run_dir / "trackio").resolve()
        where.mkdir(parents=True, exist_ok=True)
        os.environ["TRACKIO_DIR"] = str(where)
        import trackio
        import trackio.sqlite_storage
        import trackio.utils

        for mod in (trackio.utils, trackio.sqlite_storage):  # read once at import: see module docstring
            if hasattr(mod, "TRACKIO_DIR"):
                mod.TRACKIO_DIR = where
        self.trackio, self.run = trackio, run
        with _quiet():
            self.tr = trackio.init(project=run.project, name=f"{run.name}-{run.phase}" if run.phase else run.name,
                                   config=_flat(run.config), embed=False, auto_log_gpu=False, auto_log_cpu=False)

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        with _quiet():
            self.tr.log({_tag(self.run, k): v for k, v in scalars.items()}, step=step)

    def close(self) -> None:
        with _quiet():
            # the module-level finish() also clears trackio's current run; Run.finish() alone leaves
            # it set, and trackio's exit handler then finishes it again, printing at interpreter exit
            if self.trackio.context_vars.current_run.get() is self.tr:
                self.trackio.finish()
            else:  # another Trackio opened since: finish ours without touching the newer current run
                self.tr.finish()


def _quiet() -> contextlib.AbstractContextManager:
    """trackio's chatter goes to a buffer that is dropped (stdout only: see module docstring)."""
    return contextlib.redirect_stdout(io.StringIO())


for _name, _cls in (("tensorboard", TensorBoard), ("wandb", WandB), ("mlflow", MLflow), ("trackio", Trackio)):
    tracker(_name)(_cls)
