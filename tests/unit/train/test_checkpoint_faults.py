"""Checkpoints under faults: truncation and corruption are caught by the manifest and resume
falls back (one line per skipped checkpoint, naming it); a full disk is one line naming the
path and the bytes needed, with nothing left behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from posttrain.errors import PosttrainError
from posttrain.train.checkpoint import (CheckpointError, MANIFEST, latest_checkpoint, list_checkpoints,
                                        load_trainer_state, save_checkpoint, verify_checkpoint)


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    return build_tiny(seed=0)


def _save(run_dir, step, tiny, keep=5):
    model, tok = tiny
    return save_checkpoint(run_dir, step, model, tok, {"step": step, "optimizer": {"m": torch.ones(64)}}, keep=keep)


def _truncate(path: Path, keep_frac: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_frac)])


def test_manifest_names_every_file_and_a_fresh_checkpoint_verifies(tmp_path, tiny):
    ck = _save(tmp_path, 0, tiny)
    import json

    files = json.loads((ck / MANIFEST).read_text())["files"]
    on_disk = {str(p.relative_to(ck)) for p in ck.rglob("*") if p.is_file() and p.name != MANIFEST}
    assert set(files) == on_disk and {"model.safetensors", "trainer_state.pt", "step.json"} <= on_disk
    assert all(len(v["sha256"]) == 64 and v["bytes"] == (ck / k).stat().st_size for k, v in files.items())
    assert verify_checkpoint(ck) is None


@pytest.mark.parametrize("name", ["model.safetensors", "trainer_state.pt"])
def test_truncated_latest_is_skipped_with_one_line_naming_it(tmp_path, tiny, capsys, name):
    _save(tmp_path, 3, tiny)
    bad = _save(tmp_path, 7, tiny)
    _truncate(bad / name)
    capsys.readouterr()  # drop save_pretrained's progress bar
    got = latest_checkpoint(tmp_path)
    assert got == tmp_path / "checkpoints" / "step-3"
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and name in lines[0] and "truncated" in lines[0]
    assert load_trainer_state(got)["step"] == 3  # the fallback really loads


def test_same_size_corruption_is_caught_by_the_hash(tmp_path, tiny, capsys):
    _save(tmp_path, 1, tiny)
    bad = _save(tmp_path, 2, tiny)
    p = bad / "model.safetensors"
    data = bytearray(p.read_bytes())
    data[-10] ^= 0xFF
    p.write_bytes(bytes(data))
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step-1"
    assert "model.safetensors does not match its sha256" in capsys.readouterr().err


def test_every_checkpoint_broken_means_none_and_a_line_for_each(tmp_path, tiny, capsys):
    for s in (1, 2):
        _truncate(_save(tmp_path, s, tiny) / "trainer_state.pt")
    capsys.readouterr()
    assert latest_checkpoint(tmp_path) is None
    err = capsys.readouterr().err
    assert err.count("skipping checkpoint") == 2 and "step-1" in err and "step-2" in err


def test_reading_a_truncated_trainer_state_names_the_path(tmp_path, tiny):
    ck = _save(tmp_path, 0, tiny)
    _truncate(ck / "trainer_state.pt")
    with pytest.raises(CheckpointError, match=str(ck / "trainer_state.pt")) as e:
        load_trainer_state(ck)
    assert "\n" not in str(e.value)


def test_a_stale_temp_dir_from_a_crash_is_removed_by_the_next_save(tmp_path, tiny):
    stale = tmp_path / "checkpoints" / ".tmp-step-5"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")
    _save(tmp_path, 6, tiny)
    assert not stale.exists() and list_checkpoints(tmp_path) == [6]


@pytest.fixture()
def small_disk(tmp_path):
    """A real 1 MiB tmpfs: the tiny model's checkpoint (~2 MB) does not fit."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def _assert_one_line_enospc(e: CheckpointError, mnt: Path) -> None:
    msg = str(e)
    assert isinstance(e, PosttrainError)  # the CLI prints it as one line, no traceback
    assert "\n" not in msg and "no space left on device" in msg
    assert str(mnt / "checkpoints" / "step-0") in msg and "bytes" in msg
    assert e.__cause__ is None and (e.__context__ is None or e.__suppress_context__)  # no chained traceback


def test_full_disk_up_front_is_one_line_and_writes_nothing(small_disk, tiny):
    with pytest.raises(CheckpointError) as e:
        _save(small_disk, 0, tiny)
    _assert_one_line_enospc(e.value, small_disk)
    assert "needs ~" in str(e.value)
    assert os.listdir(small_disk / "checkpoints") == []


def test_disk_filling_mid_write_is_one_line_and_leaves_no_temp_dir(small_disk, tiny, monkeypatch):
    from posttrain.train import checkpoint

    monkeypatch.setattr(checkpoint, "_free_bytes", lambda _p: 1 << 40)  # the up-front check passes: the kernel says ENOSPC
    with pytest.raises(CheckpointError) as e:
        _save(small_disk, 0, tiny)
    _assert_one_line_enospc(e.value, small_disk)
    assert "while writing" in str(e.value)
    assert os.listdir(small_disk / "checkpoints") == []  # no .tmp-step-0 behind


@pytest.mark.filterwarnings("ignore:Cannot enable progress bars")  # the hub's own bars, when the CLI's env is set
def test_a_checkpoint_write_prints_no_progress_bar(tmp_path, tiny, capfd):
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()  # as in a fresh process that loaded nothing through posttrain yet
    _save(tmp_path, 0, tiny)
    out, err = capfd.readouterr()
    assert "Writing model shards" not in out + err
