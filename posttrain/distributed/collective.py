"""Weight broadcast over torch.distributed: NCCL between GPUs, gloo between CPUs.

    bc = Broadcaster.create(handles, backend="auto", timeout_s=60)   # driver = rank 0, workers 1..n
    refs = bc.broadcast(state, version, manifest)   # one ref per worker: its verified install report

The object store (remote_engine.py's default) copies the state into plasma and every node
pulls it. Where the workers sit on GPUs, a collective moves the tensors device to device
instead, the path verl and OpenRLHF take. This module builds its own process group from a
TCPStore (not torch's default group, which a training job may own) with the driver as
rank 0 and every rollout worker as rank 1..n. A sync sends the layout (names, shapes,
dtypes) with a `recv_weights` call to every worker, then broadcasts one flat buffer per
dtype; each worker slices its buffer back into tensors and installs them through its
engine's `load_weights`, which verifies every tensor against the trainer's manifest.

Faults: a collective cannot drop a member midway. If a worker dies, or the broadcast
fails or times out (`timeout_s`), the group is broken for good; `RemoteEngine` then falls
back to the object store for this sync and every later one, and drops the dead worker as
it always does. `gloo` on CPU is what the tests run; `nccl` is the same code on GPUs.
"""

from __future__ import annotations

import datetime
import math
import socket
from typing import Any, Mapping, Sequence

Layout = list[tuple[str, tuple[int, ...], str]]  # (name, shape, dtype name), in send order


def make_group(host: str, port: int, rank: int, world: int, backend: str, timeout_s: float) -> Any:
    """A process group of its own over a TCPStore (rank 0 hosts the store)."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world, rank == 0, timeout=timeout)
    if backend == "nccl":
        return dist.ProcessGroupNCCL(store, rank, world)
    return dist.ProcessGroupGloo(store, rank, world, timeout)


def resolve_backend(backend: str) -> str:
    import torch

    if backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"cluster.collective_backend must be auto, gloo or nccl, got {backend!r}")
    return backend


def broadcast_buffers(pg: Any, buffers: Sequence[Any]) -> None:
    """Broadcast each buffer from rank 0, in order (in place on the receivers)."""
    import torch.distributed as dist

    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    for b in buffers:
        pg.broadcast([b], opts).wait()


def flatten(state: Mapping[str, Any]) -> tuple[Layout, list[Any]]:
    """The layout and one contiguous flat buffer per dtype (in first-seen order)."""
    import torch

    layout: Layout = []
    by_dtype: dict[str, list[Any]] = {}
    for name, t in state.items():
        dt = str(t.dtype).replace("torch.", "")
        layout.append((name, tuple(t.shape), dt))
        by_dtype.setdefault(dt, []).append(t.detach().reshape(-1))
    return layout, [torch.cat(ts).contiguous() for ts in by_dtype.values()]


def empty_buffers(layout: Layout, device: Any = "cpu") -> list[Any]:
    import torch

    sizes: dict[str, int] = {}
    for _, shape, dt in layout:
        sizes[dt] = sizes.get(dt, 0) + math.prod(shape)
    return [torch.empty(n, dtype=getattr(torch, dt), device=device) for dt, n in sizes.items()]


def unflatten(layout: Layout, buffers: Sequence[Any]) -> dict[str, Any]:
    """Views into the received buffers, named and shaped as the sender's state."""
    order = list(dict.fromkeys(dt for _, _, dt in layout))
    at = {dt: 0 for dt in order}
    buf = dict(zip(order, buffers))
    out = {}
    for name, shape, dt in layout:
        n = math.prod(shape)
        out[name] = buf[dt][at[dt]:at[dt] + n].view(shape)
        at[dt] += n
    return out


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Broadcaster:
    """The driver's side of the group; see the module doc."""

    def __init__(self, pg: Any, handles: Sequence[Any], backend: str) -> None:
        self.pg, self.handles, self.backend = pg, list(handles), backend

    @classmethod
    def create(cls, handles: Sequence[Any], backend: str = "auto", timeout_s: float = 60.0,
               host: str | None = None) -> "Broadcaster":
        import ray

        backend = resolve_backend(backend)
        host = host or ray.util.get_node_ip_address()
        port = free_port(host)
        world = len(handles) + 1
        refs = [h.join_group.remote(host, port, i + 1, world, backend, timeout_s) for i, h in enumerate(handles)]
        pg = make_group(host, port, 0, world, backend, timeout_s)  # returns once every worker has joined
        ray.get(refs, timeout=timeout_s)
        return cls(pg, handles, backend)

    def broadcast(self, state: Mapping[str, Any], version: int, manifest: Mapping[str, str] | None,
                  method: str = "recv_weights", **kw: Any) -> list[Any]:
        """Start every worker's receive (`method`: recv_weights, or recv_bucket for one bucket
        of a bucketed sync), send the buffers; returns the workers' refs."""
        layout, buffers = flatten(state)
        if self.backend == "nccl":
            buffers = [b.cuda() for b in buffers]
        refs = [getattr(h, method).remote(layout, version, manifest, **kw) for h in self.handles]
        broadcast_buffers(self.pg, buffers)
        return refs
