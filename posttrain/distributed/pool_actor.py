"""`SandboxPoolActor`: one per node, owning that node's `SandboxPool` (runs inside Ray).

    actor = SandboxPoolActor.options(scheduling_strategy=NodeAffinity(node_id)).remote(cores, jitter_s)
    await actor.start.remote()            # jittered, then pre-warms slots
    res = await actor.exec.remote(cmd, files, stdin, limits, image, read_files)
    results = await actor.exec_many.remote([(cmd, files, stdin, limits, image, read_files), ...])

The actor is an asyncio actor: many executions share its event loop, bounded by the
pool's own semaphore (sized to the node's cores), exactly as on a single machine.
Sessions live here, keyed by an id the driver holds, so a multi-step episode stays
pinned to this node for its whole life.

Start-up is jittered (a random delay up to `jitter_s`) so a 100-node cluster does not
fork 100 x cores warm interpreters in the same second. Limits: a session dies with
the actor; the driver turns that into an infra error (see dispatcher.py).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import uuid
from typing import Any, Sequence

from posttrain.distributed.wire import to_wire
from posttrain.types import ExecLimits


class SandboxPoolActor:
    def __init__(self, concurrency: int, jitter_s: float = 1.0, warm: int = 0) -> None:
        self.concurrency, self.jitter_s, self.n_warm = concurrency, jitter_s, warm
        self.pool: Any = None
        self.sessions: dict[str, Any] = {}
        self.node = os.environ.get("RAY_NODE_NAME") or socket.gethostname()

    async def start(self) -> dict[str, Any]:
        """Jittered start: sleep, build the pool, pre-warm `warm` slots. Returns node facts."""
        from posttrain.sandbox.pool import SandboxPool

        delay = random.uniform(0, self.jitter_s)
        await asyncio.sleep(delay)
        self.pool = SandboxPool(concurrency=self.concurrency)
        if self.n_warm:
            await self.pool.warm(n=min(self.n_warm, self.concurrency))
        return {"pid": os.getpid(), "concurrency": self.concurrency, "jitter_s": delay,
                "mode": "fresh" if self.pool.pooled_unavailable else "pooled"}

    async def exec(self, cmd: Sequence[str], files: dict | None, stdin: bytes, limits: ExecLimits | None,
                   image: str, read_files: Sequence[str]) -> dict:
        return to_wire(await self.pool.exec(cmd, files, stdin, limits, image, read_files))

    async def exec_many(self, requests: Sequence[tuple]) -> list[dict]:
        """Several executions in one call (the driver coalesces them); each answer is its result in
        wire form, or {"__error__": message} for a request the pool refused, so one bad request
        never fails its batch-mates."""
        async def one(req: tuple) -> dict:
            try:
                return to_wire(await self.pool.exec(*req))
            except Exception as e:  # noqa: BLE001 - reported per request; the driver re-raises it
                return {"__error__": f"{type(e).__name__}: {e}", "sandbox": type(e).__name__ == "SandboxError"}

        return list(await asyncio.gather(*(one(r) for r in requests)))

    async def ping(self) -> int:
        return os.getpid()

    async def open_session(self, image: str, limits: ExecLimits | None) -> str:
        s = await self.pool.open_session(image, limits)
        sid = uuid.uuid4().hex
        self.sessions[sid] = s
        return sid

    async def session_call(self, sid: str, method: str, args: tuple) -> Any:
        if method not in ("run", "read_file", "write_file", "snapshot", "diff"):
            raise ValueError(f"unknown session method {method!r}")
        s = self.sessions.get(sid)
        if s is None:
            from posttrain.errors import SandboxError

            raise SandboxError(f"session {sid[:8]} is not open on this node")
        return to_wire(await getattr(s, method)(*args))

    async def close_session(self, sid: str) -> None:
        s = self.sessions.pop(sid, None)
        if s is not None:
            await s.close()
            self.pool._sessions.discard(s)

    async def stats(self) -> dict[str, Any]:
        return {"executions": self.pool.executions if self.pool else 0, "sessions": len(self.sessions),
                "recycled": self.pool.recycled if self.pool else 0}

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
