"""Weights from the sharded trainer to a rollout engine in bounded buckets, verified on arrival.

    rep = push_buckets(sh, engine, version, bucket_bytes=64 << 20)

Every rank walks the parameters in the same order; each tensor is gathered whole
(`DTensor.full_tensor`, an all-gather over its mesh), kept on rank 0 only (the other ranks
drop it at once) and added to the current bucket; when the bucket reaches `bucket_bytes`
rank 0 installs it and lets it go. So rank 0 holds at most one bucket (plus one tensor)
besides its shards and the engine's own weights, never a second full copy.

Arrival: for the in-process `fast` engine, each bucket goes through
`rollout.weight_sync.install` against the engine's tensors, which re-reads every installed
tensor and compares it with what was sent (exact), as a full sync does. The engine
refuses to generate (weights_version -1) until the last bucket is in, then takes the new
version and drops its KV cache. An engine without per-tensor views gets the buckets
merged into one state (a full copy: logged as such in `SyncStats.full_copy`).

Limits: the Ray collective path (distributed/collective.py) still sends a flat buffer per
dtype; a tensor larger than `bucket_bytes` is a bucket of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from posttrain.train.sharded.group import RankContext, handler


@dataclass
class SyncStats:
    version: int
    buckets: int
    bytes: int
    max_bucket_bytes: int
    seconds: float
    full_copy: bool


def _full_tensors(ctx: RankContext) -> Iterator[tuple[str, torch.Tensor | None]]:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    rank = dist.get_rank()
    for name, t in ctx.model.state_dict().items():
        full = t.full_tensor() if isinstance(t, DTensor) else t
        yield name, (full.detach().cpu() if rank == 0 else None)
        del full


@handler("gather_buckets")
def gather_buckets(ctx: RankContext, p: dict) -> Any:
    """On rank 0, `ctx.extra["on_bucket"]` receives each bucket (a dict); elsewhere nothing is kept."""
    sink = ctx.extra.get("on_bucket")
    bucket: dict[str, torch.Tensor] = {}
    size = 0
    with torch.no_grad():
        for name, full in _full_tensors(ctx):
            if full is None:
                continue
            bucket[name] = full
            size += full.numel() * full.element_size()
            if size >= p["bucket_bytes"]:
                sink(bucket)
                bucket, size = {}, 0
        if bucket:
            sink(bucket)
    return None


def push_buckets(sh: Any, engine: Any, version: int, bucket_bytes: int = 64 << 20) -> SyncStats:
    from posttrain.rollout.weight_sync import install

    t0 = time.perf_counter()
    views = getattr(engine, "_views", None)
    stats = SyncStats(version, 0, 0, 0, 0.0, views is None)
    merged: dict[str, torch.Tensor] = {}
    lock = getattr(engine, "_lock", None)
    tied = getattr(getattr(engine, "lm", None), "tied", False)

    def on_bucket(bucket: dict[str, torch.Tensor]) -> None:
        nbytes = sum(t.numel() * t.element_size() for t in bucket.values())
        stats.buckets, stats.bytes = stats.buckets + 1, stats.bytes + nbytes
        stats.max_bucket_bytes = max(stats.max_bucket_bytes, nbytes)
        if views is None:
            merged.update(bucket)
            return
        part = {k: views[k] for k in bucket if k in views}
        unknown = [k for k in bucket if k not in views and not (tied and k == "lm_head.weight")]
        if unknown:
            from posttrain.rollout.weight_sync import WeightSyncError

            raise WeightSyncError(f"weight sync v{version}: the engine has no tensor {unknown[0]}")
        install(part, {k: bucket[k] for k in part}, version)

    sh.ctx.extra["on_bucket"] = on_bucket
    if views is None:
        sh.driver.call("gather_buckets", {"bucket_bytes": bucket_bytes})
        engine.load_weights(merged, version)
    else:
        with lock if lock is not None else _nullcontext():
            engine.weights_version = -1  # partially installed: no generation until the last bucket
            sh.driver.call("gather_buckets", {"bucket_bytes": bucket_bytes})
            engine.store.clear()  # the KV cache of the previous weights
            for c in list(getattr(engine, "_conversations", ())):
                c._invalidate()
            engine.weights_version = version
    stats.seconds = time.perf_counter() - t0
    return stats


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None
