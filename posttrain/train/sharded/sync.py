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
merged into one state (weight_sync.MergedInstall, a full copy: `SyncStats.full_copy`).

The Ray rollout workers (distributed/bucket_sync.py) take the same buckets, each sent by
the collective or the object store and installed by every worker as it arrives; a
collective that breaks mid-sync raises `SyncRestart`, and the gather runs again over the
object store.

Limits: a tensor larger than `bucket_bytes` is a bucket of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from posttrain.parallel.group import RankContext, handler


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


def push_buckets(sh: Any, engine: Any, version: int, bucket_bytes: int = 64 << 20, retries: int = 1) -> SyncStats:
    """Gather the trainer's weights bucket by bucket into `engine.begin_weights(version)`.

    The sink never raises inside the gather: rank 0 alone leaving the loop would leave the
    other ranks blocked in their all-gathers. The first error is kept, the remaining
    buckets are skipped, and it is raised (or, for a `SyncRestart`, the gather is run again
    into a fresh sync) once every rank is through.
    """
    from posttrain.rollout.weight_sync import SyncRestart, begin_weights

    t0 = time.perf_counter()
    for attempt in range(retries + 1):
        sync = begin_weights(engine, version)
        stats = SyncStats(version, 0, 0, 0, 0.0, bool(getattr(sync, "full_copy", False)))
        err: list[BaseException] = []

        def on_bucket(bucket: dict[str, torch.Tensor]) -> None:
            if err:
                return
            nbytes = sum(t.numel() * t.element_size() for t in bucket.values())
            stats.buckets, stats.bytes = stats.buckets + 1, stats.bytes + nbytes
            stats.max_bucket_bytes = max(stats.max_bucket_bytes, nbytes)
            try:
                sync.add(bucket)
            except Exception as e:  # noqa: BLE001 - raised below, after the gather
                err.append(e)

        sh.ctx.extra["on_bucket"] = on_bucket
        try:
            sh.driver.call("gather_buckets", {"bucket_bytes": bucket_bytes})
        except BaseException:
            sync.abort()
            raise
        finally:
            sh.ctx.extra.pop("on_bucket", None)
        if not err:
            sync.finish()
            stats.seconds = time.perf_counter() - t0
            return stats
        sync.abort()
        if not isinstance(err[0], SyncRestart) or attempt == retries:
            raise err[0]
    raise AssertionError("unreachable")
