"""Versioned, verified weight installation for the `fast` engine.

    man = manifest(policy.state_dict(), version)   # trainer side: one digest per tensor
    report = install(engine_views, state, version, man)   # engine side: copy, then verify

A digest is blake2b over a tensor's dtype, shape and bytes ("full"), or over a fixed,
version-seeded sample of 4,096 of its elements plus its fp64 sum ("sampled", for tensors
above `FULL_LIMIT` elements, so a 70B sync is not dominated by hashing). Verification
re-reads what was installed in the engine's own (fused) tensors and compares digests, so
a bad copy, a wrong slice or a tensor corrupted in transit raises `WeightSyncError`
naming the tensor. The remote protocol built on this (push, handshake, timeout, full
reload fallback) is described in docs/rollout.md.

Limits: "sampled" mode detects a corruption only if it touches a sampled element or
moves the sum; a single flipped low bit in an unsampled element of a huge tensor can pass.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from posttrain.errors import ModelError

log = logging.getLogger(__name__)
FULL_LIMIT = 1 << 24  # elements; larger tensors are digested by sampling
SAMPLES = 4096


class WeightSyncError(ModelError):
    """Installed weights do not match what was sent (or the names/shapes do not fit)."""


class SyncRestart(RuntimeError):
    """A bucketed sync's transport broke midway and the sink has switched to another: the
    sender must send every bucket again (train/sharded/sync.push_buckets does)."""


@dataclass(frozen=True)
class SyncReport:
    version: int
    tensors: int
    bytes: int
    copy_s: float
    verify_s: float
    # The engine names whose bytes this sync changed; None: not known (treat all as changed).
    # Under LoRA on q/k/v/o four fifths of SmolLM2's weights never change between syncs.
    changed: frozenset[str] | None = None

    @property
    def total_s(self) -> float:
        return self.copy_s + self.verify_s


def digest(t: torch.Tensor, salt: int = 0) -> str:
    """Content digest of one tensor (full bytes, or a salted sample for huge tensors)."""
    t = t.detach()
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    flat = t.reshape(-1)
    if flat.numel() > FULL_LIMIT:
        g = torch.Generator().manual_seed(salt)
        idx = torch.randint(0, flat.numel(), (SAMPLES,), generator=g).to(flat.device)
        h.update(flat[idx].cpu().contiguous().view(torch.uint8).numpy().tobytes())
        h.update(repr(flat.double().sum().item()).encode())
    else:
        h.update(flat.cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def manifest(state: Mapping[str, Any], version: int, dtype: torch.dtype | None = None) -> dict[str, str]:
    """Digest of every tensor in `state` as the engine will hold it (cast to `dtype`).

    The version salts the sampled digests, so each sync checks different elements.
    """
    return {k: digest(v.to(dtype) if dtype is not None else v, version) for k, v in state.items()}


def install(views: Mapping[str, torch.Tensor], state: Mapping[str, Any], version: int,
            expected: Mapping[str, str] | None = None, tied: tuple[str, str] | None = None) -> SyncReport:
    """Copy `state` into `views` (HF name -> engine tensor slice) and verify every tensor.

    `expected` is the sender's manifest (across processes, where only digests travel);
    without one (same process) every installed tensor is compared with its source, cast to the
    view's dtype, byte for byte, which is exact and cheaper than hashing both; a tensor the view
    already holds so is skipped. `tied` = (lm_head, embed) names:
    the state may carry the tied head, which must then equal the embedding.
    """
    missing = sorted(set(views) - set(state))
    extra = sorted(set(state) - set(views) - ({tied[0]} if tied else set()))
    if missing or extra:
        raise WeightSyncError(f"weight sync v{version}: missing {missing[:5]} unexpected {extra[:5]}")
    for name, view in views.items():
        if tuple(state[name].shape) != tuple(view.shape):
            raise WeightSyncError(f"weight sync v{version}: {name} has shape {tuple(state[name].shape)}, "
                                  f"engine expects {tuple(view.shape)}")
    t0 = time.perf_counter()
    nbytes = 0
    changed = set(views)
    with torch.no_grad():
        for name, view in views.items():
            src = state[name]
            if expected is None:  # same process: the source as the view holds it, cast once for the check and the copy
                low = src.to(device=view.device, dtype=view.dtype)
                if torch.equal(view, low):
                    changed.discard(name)  # already what the copy would write: the comparison verified it
                    continue
                src = low
            view.copy_(src)
            nbytes += view.numel() * view.element_size()
    t1 = time.perf_counter()
    # Every copy is in before any is verified: a view that overlaps another (a wrong slice) is caught
    # when the later copy has overwritten the earlier one's bytes.
    for name, view in views.items():
        if name not in changed:
            continue
        if expected is None:  # same process: compare the installed bytes with the source, exactly
            src = state[name].to(device=view.device, dtype=view.dtype)
            if not (torch.equal(view, src) or bool(((view == src) | (view.isnan() & src.isnan())).all())):
                raise WeightSyncError(f"weight sync v{version}: tensor {name} differs from the trainer's after install")
            continue
        if name not in expected:
            raise WeightSyncError(f"weight sync v{version}: manifest has no digest for {name}")
        if digest(view, version) != expected[name] and not _arrived_and_cast(view, state[name], expected[name], version):
            raise WeightSyncError(f"weight sync v{version}: tensor {name} does not match its checksum after install")
    if tied and tied[0] in state and not torch.equal(state[tied[0]].to(views[tied[1]].dtype), views[tied[1]]):
        raise WeightSyncError(f"weight sync v{version}: {tied[0]} differs from tied {tied[1]}")
    rep = SyncReport(version, len(views), nbytes, t1 - t0, time.perf_counter() - t1, frozenset(changed))
    log.info("weight sync v%d: %d tensors (%d changed), %.1f MB copied, copy %.1f ms, verify %.1f ms", version,
             rep.tensors, len(changed), nbytes / 2**20, rep.copy_s * 1e3, rep.verify_s * 1e3)
    return rep


def _arrived_and_cast(view: torch.Tensor, src: Any, expected: str, version: int) -> bool:
    """A view the engine holds in another dtype than the sender digested (the fast engine's bf16
    weight matrices, set_matmul_dtype): the bytes that arrived match the digest and went in cast."""
    return view.dtype != src.dtype and digest(src, version) == expected and torch.equal(view, src.to(view.dtype))


class BucketedInstall:
    """One sync that arrives in buckets, installed into an engine's own tensors as it comes.

        sync = begin_weights(engine, version)     # the engine refuses to generate from here
        for bucket in buckets:                    # bucket: HF name -> tensor, any split
            sync.add(bucket, expected)            # copied in and verified at once
        sync.finish()                             # every tensor arrived -> the engine takes `version`

    Nothing but one bucket is held besides the engine's weights. The engine's lock is held
    from `begin` to `finish`/`abort`, so no generation on another thread sees half of a sync
    (`lock=False` where calls are serialised anyway, as on a Ray actor: a sync left open must
    not hang the next generate); the engine is at weights_version -1 throughout, so a
    generate refuses, and stays there after an error or `abort` until a sync succeeds. A tied
    lm_head is checked against the embedding once both are in.
    """

    full_copy = False

    def __init__(self, engine: Any, version: int, lock: bool = True) -> None:
        self.engine, self.version = engine, version
        self.views: Mapping[str, torch.Tensor] = engine._views
        lm = engine.lm
        self.tied = ("lm_head.weight", lm.prefix + "embed_tokens.weight") if lm.tied else None
        self.done: set[str] = set()
        self.head: torch.Tensor | None = None  # a tied head that came before its embedding
        self.tensors = self.bytes = 0
        self.copy_s = self.verify_s = 0.0
        self.changed: set[str] | None = set()
        self._open, self._lock = True, engine._lock if lock else None
        if self._lock is not None:
            self._lock.acquire()
        engine.weights_version = -1  # partially installed: no generation until `finish`

    def add(self, bucket: Mapping[str, Any], expected: Mapping[str, str] | None = None) -> None:
        try:
            self._add(bucket, expected)
        except BaseException:
            self.abort()
            raise

    def _add(self, bucket: Mapping[str, Any], expected: Mapping[str, str] | None) -> None:
        v = self.version
        unknown = [k for k in bucket if k not in self.views and not (self.tied and k == self.tied[0])]
        if unknown:
            raise WeightSyncError(f"weight sync v{v}: the engine has no tensor {unknown[0]}")
        again = [k for k in bucket if k in self.done]
        if again:
            raise WeightSyncError(f"weight sync v{v}: tensor {again[0]} arrived twice")
        part = {k: self.views[k] for k in bucket if k in self.views}
        rep = install(part, {k: bucket[k] for k in part}, v, expected)
        self.done |= set(part)
        self.changed = None if self.changed is None or rep.changed is None else self.changed | rep.changed
        self.tensors, self.bytes = self.tensors + rep.tensors, self.bytes + rep.bytes
        self.copy_s, self.verify_s = self.copy_s + rep.copy_s, self.verify_s + rep.verify_s
        if self.tied and self.tied[0] in bucket:
            self.head = bucket[self.tied[0]].detach().clone()
        if self.head is not None and self.tied[1] in self.done:
            if not torch.equal(self.head.to(self.views[self.tied[1]].dtype), self.views[self.tied[1]]):
                raise WeightSyncError(f"weight sync v{v}: {self.tied[0]} differs from tied {self.tied[1]}")
            self.head = None

    def finish(self) -> SyncReport:
        if not self._open:
            raise WeightSyncError(f"weight sync v{self.version}: finish after the sync was aborted")
        missing = sorted(set(self.views) - self.done)
        if missing:
            self.abort()
            raise WeightSyncError(f"weight sync v{self.version}: no bucket carried {missing[:5]}")
        rep = SyncReport(self.version, self.tensors, self.bytes, self.copy_s, self.verify_s,
                         None if self.changed is None else frozenset(self.changed))
        try:
            self.engine._commit_weights(rep)
        finally:
            self._release()
        return rep

    def abort(self) -> None:
        """Give up this sync: the engine keeps weights_version -1 (mixed weights) and is unlocked."""
        if self._open:
            self.engine.weights_version = -1
            self._release()

    def _release(self) -> None:
        self._open = False
        if self._lock is not None:
            self._lock.release()


class MergedInstall:
    """`BucketedInstall` for an engine without per-tensor views: the buckets are merged into
    one state and loaded at `finish` (a full copy; `full_copy` says so)."""

    full_copy = True

    def __init__(self, engine: Any, version: int, lock: bool = True) -> None:
        self.engine, self.version = engine, version
        self.state: dict[str, Any] = {}
        self.expected: dict[str, str] | None = None

    def add(self, bucket: Mapping[str, Any], expected: Mapping[str, str] | None = None) -> None:
        self.state.update(bucket)
        if expected is not None:
            self.expected = {**(self.expected or {}), **expected}

    def finish(self) -> Any:
        state, self.state = self.state, {}
        if self.expected is None:
            return self.engine.load_weights(state, self.version)
        return self.engine.load_weights(state, self.version, self.expected)

    def abort(self) -> None:
        self.state = {}


def begin_weights(engine: Any, version: int, lock: bool = True) -> Any:
    """The engine's own bucketed sync (`engine.begin_weights`), else a merging one."""
    from posttrain.rollout.engine import WeightReceiver

    if not isinstance(engine, WeightReceiver):
        return MergedInstall(engine, version)
    return engine.begin_weights(version, lock=lock) if lock is False else engine.begin_weights(version)
