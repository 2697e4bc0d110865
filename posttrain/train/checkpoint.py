"""Checkpoints that resume a run exactly: model, optimizer, LR schedule, task scheduler,
RNG states, step and weights version, under `checkpoints/step-N/`.

The model goes through `save_pretrained`, so every checkpoint is also a loadable HF
model directory (`posttrain eval --model runs/x/checkpoints/step-40`).

Atomic and verified:
- written into `.tmp-step-N/`, every file fsynced, then `manifest.json` (size and sha256
  of every file) last, then renamed into place: a crash mid-write never leaves a
  `step-N/` that resume would pick up, and any failure removes the temporary directory;
- before writing, the free space is checked against the checkpoint's size; a full disk
  (up front or mid-write) is one `CheckpointError` line naming the path and the bytes
  needed, no traceback, nothing left behind;
- resume (`latest_checkpoint`) checks the newest checkpoint against its manifest and falls
  back to the newest intact one, printing one line per skipped checkpoint (path and why).

Limits: a checkpoint written before manifests existed is loaded unverified (with a
note). Sizes are checked on every call; hashes once per process per manifest.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from posttrain.errors import PosttrainError
from posttrain.store.run import RunDir

MANIFEST = "manifest.json"
_SLACK_BYTES = 1 << 20  # tokenizer, config, JSON, filesystem blocks on top of the tensors
_verified: dict[tuple[str, int], str | None] = {}  # (manifest path, its mtime_ns) -> why bad / None
_reported: set[tuple[str, str]] = set()  # skip lines already printed


class CheckpointError(PosttrainError):
    """A checkpoint could not be written or read; the message names the path."""


def rng_state() -> dict[str, Any]:
    """This process's global generators. "cuda": the current device's, once CUDA is in use (asking
    earlier would start a CUDA context, on device 0, in a process that never uses one)."""
    s = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        s["cuda"] = torch.cuda.get_rng_state()
    return s


def set_rng_state(s: dict[str, Any]) -> None:
    """A state of `rng_state`'s; its "cuda" part is skipped without CUDA (a GPU run resumed on CPU)."""
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state(s["cuda"])


def tensor_bytes(obj: Any) -> int:
    """Bytes of every tensor in a (nested) state: what a checkpoint of it needs on disk, roughly."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def _no_space(e: BaseException) -> bool:
    """Did this failure come from a full disk? torch and safetensors wrap the OSError in their own types."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(e)
        if "No space left on device" in text or "StorageFull" in text or "os error 28" in text:
            return True
        e = e.__cause__ or e.__context__
    return False


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return -1


def save_checkpoint(run_dir: Path, step: int, model: Any, tokenizer: Any, trainer_state: dict[str, Any],
                    keep: int = 2) -> Path:
    run = RunDir(run_dir)
    root = run.checkpoints
    root.mkdir(parents=True, exist_ok=True)
    for stale in run.stale_checkpoint_tmps():  # an earlier process died mid-write (kill -9, power loss)
        shutil.rmtree(stale, ignore_errors=True)
    final = run.checkpoint(step)
    tmp = run.checkpoint_tmp(step)
    state = {**trainer_state, "rng": rng_state()}
    needed = tensor_bytes(model.state_dict()) + tensor_bytes(state) + _SLACK_BYTES
    free = _free_bytes(root)
    if 0 <= free < needed:
        raise CheckpointError(f"cannot write checkpoint {final}: it needs ~{needed:,} bytes and {root} has {free:,} "
                              f"free (no space left on device); free some space or lower rl.keep_checkpoints")
    writing = tmp
    try:
        writing = f"the model (save_pretrained) into {tmp}"
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # its "Writing model shards" bar, once per checkpoint, in library use too
        model.save_pretrained(tmp)
        writing = f"the tokenizer into {tmp}"
        tokenizer.save_pretrained(tmp)
        writing = tmp / "trainer_state.pt"
        torch.save(state, writing)
        writing = tmp / "step.json"
        writing.write_text(json.dumps({"step": step}))
        writing = tmp / MANIFEST
        _write_manifest(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _fsync_dir(root)
    except BaseException as e:
        left = _free_bytes(root)
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, Exception) and (_no_space(e) or 0 <= left < (1 << 20)):
            raise CheckpointError(f"cannot write checkpoint {final}: no space left on device while writing {writing} "
                                  f"(the checkpoint needs ~{needed:,} bytes, {max(free, 0):,} were free before it "
                                  f"started); nothing was kept of it") from None
        raise
    for old in sorted(list_checkpoints(run_dir))[:-keep] if keep > 0 else []:
        shutil.rmtree(run.checkpoint(old), ignore_errors=True)
    return final


def _files(d: Path) -> Iterable[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file() and p.name != MANIFEST)


def _sha256(path: Path, fsync: bool = False) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
        if fsync:
            os.fsync(f.fileno())
    return h.hexdigest()


def _write_manifest(d: Path) -> None:
    entries = {str(p.relative_to(d)): {"bytes": p.stat().st_size, "sha256": _sha256(p, fsync=True)} for p in _files(d)}
    with open(d / MANIFEST, "w") as f:
        json.dump({"version": 1, "files": entries}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(d)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify_checkpoint(ckpt: Path) -> str | None:
    """Why `ckpt` is not intact (one clause naming the file), or None when its manifest matches."""
    ckpt = Path(ckpt)
    man = ckpt / MANIFEST
    try:
        key = (str(man), man.stat().st_mtime_ns)
    except FileNotFoundError:
        return None if (ckpt / "step.json").is_file() else "no step.json"
    try:
        files = json.loads(man.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{MANIFEST} is unreadable ({type(e).__name__})"
    for rel, want in files.items():  # sizes every time: cheap, and what truncation changes
        try:
            size = (ckpt / rel).stat().st_size
        except FileNotFoundError:
            return f"{rel} is missing"
        if size != want["bytes"]:
            return f"{rel} is {size:,} bytes, the manifest says {want['bytes']:,} (truncated or overwritten)"
    if key not in _verified:
        _verified[key] = next((f"{rel} does not match its sha256 in the manifest (corrupted)"
                               for rel, want in files.items() if _sha256(ckpt / rel) != want["sha256"]), None)
    return _verified[key]


def list_checkpoints(run_dir: Path) -> list[int]:
    run = RunDir(run_dir)
    return [s for s in run.checkpoint_steps() if (run.checkpoint(s) / "step.json").is_file()]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest intact checkpoint; each newer one that fails its manifest is skipped with one line on stderr."""
    for step in reversed(list_checkpoints(run_dir)):
        ckpt = RunDir(run_dir).checkpoint(step)
        why = verify_checkpoint(ckpt)
        if why is None:
            if not (ckpt / MANIFEST).is_file():
                _report(ckpt, f"posttrain: checkpoint {ckpt} has no {MANIFEST} (written by an older version): "
                              f"loading it unverified")
            return ckpt
        _report(ckpt, f"posttrain: skipping checkpoint {ckpt}: {why}")
    return None


def _report(ckpt: Path, line: str) -> None:
    if (str(ckpt), line) not in _reported:
        _reported.add((str(ckpt), line))
        print(line, file=sys.stderr, flush=True)


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    path = Path(ckpt) / "trainer_state.pt"
    try:
        return torch.load(path, weights_only=False)
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file: name it, no traceback
        raise CheckpointError(f"cannot read {path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}; "
                              f"delete that checkpoint directory to resume from the one before") from None
