"""Every tracker with its real library: what MetricsLog logs can be read back from its files."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config
from posttrain.errors import ConfigError
from posttrain.registry import registry
from posttrain.store.metrics import MetricsLog
from posttrain.store.trackers import RunInfo

ROWS = [{"reward/mean": 0.25, "eval/pass@1": 0.5, "note": "text is not a scalar"}, {"reward/mean": 0.75}]


def _log(run_dir, name, phase="rl"):
    log = MetricsLog(run_dir, trackers=[name], run=RunInfo(name="t", project="posttrain-test", phase=phase,
                                                          config={"rl": {"lr": 1e-4}}))
    for step, row in enumerate(ROWS):
        log.log(step, row)
    log.close()
    return log


def test_all_four_trackers_are_registered_by_name():
    assert {"tensorboard", "wandb", "mlflow", "trackio"} <= set(registry("tracker").names())


def test_tensorboard_events_hold_the_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _log(tmp_path, "tensorboard")
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [e.value for e in acc.Scalars("reward/mean")] == [0.25, 0.75]


def test_tensorboard_prefixes_sft_keys_with_the_phase(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _log(tmp_path, "tensorboard", phase="sft")
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert "sft/reward/mean" in acc.Tags()["scalars"]


def _wandb_records(path):
    """Records of an offline .wandb file: a LevelDB-style log (7-byte file header, 32 KiB blocks,
    chunks with a 7-byte header: crc32, length, type 1 full / 2 first / 3 middle / 4 last)."""
    data, pos, block, buf = path.read_bytes(), 7, 32768, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pos += 7
        buf += data[pos:pos + length]
        pos += length
        if kind in (1, 4):
            yield buf
            buf = b""


def test_wandb_offline_run_records_the_history(tmp_path, monkeypatch):
    from wandb.proto import wandb_internal_pb2 as pb

    monkeypatch.setenv("WANDB_MODE", "offline")
    _log(tmp_path, "wandb")
    # wandb's service process writes the file on its own thread: finish() can return before the last
    # records reach the disk (seen once in CI, on a busy machine), so read until both steps are there
    deadline = time.monotonic() + 60
    while True:
        (run,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
        history = []
        for raw in _wandb_records(run):
            rec = pb.Record()
            rec.ParseFromString(raw)
            if rec.WhichOneof("record_type") == "history":
                history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
        if len(history) >= len(ROWS) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [h["reward/mean"] for h in history if "reward/mean" in h] == [0.25, 0.75]
    assert history[0]["eval/pass@1"] == 0.5


def test_mlflow_file_store_holds_the_metric_history(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    _log(tmp_path, "mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    exp = client.get_experiment_by_name("posttrain-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward/mean")] == [0.25, 0.75]
    assert run.data.params["rl.lr"] == "0.0001"


def test_trackio_local_store_holds_the_logs(tmp_path):
    _log(tmp_path, "trackio")
    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs("posttrain-test", "t-rl")
    assert [r["reward/mean"] for r in logs] == [0.25, 0.75]
    assert list((tmp_path / "trackio").glob("*.db"))


def test_trackio_prints_nothing_while_logging_or_at_exit(tmp_path):
    # a fresh interpreter, because trackio's noise comes from its exit handler as well as its calls
    script = textwrap.dedent(f"""
        from pathlib import Path
        from posttrain.store.metrics import MetricsLog
        from posttrain.store.trackers import RunInfo
        log = MetricsLog(Path({str(tmp_path)!r}), trackers=["trackio"],
                         run=RunInfo(name="t", project="posttrain-test", phase="rl", config={{}}))
        log.log(0, {{"reward/mean": 0.5}})
        log.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert "trackio" not in (out.stdout + out.stderr).lower(), out.stdout + out.stderr


def test_no_tracker_writes_no_tracker_files(tmp_path):
    _log(tmp_path, "tensorboard").close()
    log = MetricsLog(tmp_path / "none", tensorboard=False)
    (tmp_path / "none").mkdir()
    log.log(0, {"a": 1.0})
    assert sorted(p.name for p in (tmp_path / "none").iterdir()) == ["metrics.jsonl"]


def test_config_names_trackers_and_check_rejects_an_unknown_one():
    cfg = load_config(None, ["log.trackers=[tensorboard, wandb]"])
    assert cfg.log.trackers == ["tensorboard", "wandb"]
    with pytest.raises(ConfigError, match="log.trackers='comet' is not a registered tracker"):
        check_config(load_config(None, ["log.trackers=[comet]"]), needs=())


def test_log_phase_sends_a_finished_phase_to_the_trackers_only(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from posttrain.store.trackers import log_phase

    log_phase(load_config(None), tmp_path, "sft", [{"loss": 2.0}, {"loss": 1.0}])
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [e.value for e in acc.Scalars("sft/loss")] == [2.0, 1.0]
    assert not (tmp_path / "metrics.jsonl").exists()
