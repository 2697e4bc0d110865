"""Batched generation for concurrent agent episodes, off the event loop.

    batcher = GenBatcher(engine)
    completion = await batcher.generate(GenRequest(ids, params))   # from any episode
    await batcher.close()

Every episode awaits its own next turn; the batcher gathers whatever requests are
pending, runs them as one `engine.generate` call in a worker thread, and resolves each
episode's future. While the engine computes, the event loop keeps running tools and
sandbox steps of the other episodes, so a slow tool delays only its own episode. The
`fast` engine keeps finished conversations' KV in its prefix store (`cache_outputs`),
so the next turn of an episode prefills only the observation it appended: multi-turn
reuse without one engine call per conversation (the `Conversation` handle generates
one request at a time, which would serialise the episodes).

Limits: one engine call at a time (engines are not thread-safe); requests that arrive
while a batch runs wait for the next batch (step-synchronous, not token-level, joins).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from posttrain.rollout.engine import Completion, GenRequest


class GenBatcher:
    def __init__(self, engine: Any, max_batch: int = 256, linger_s: float = 0.002) -> None:
        self.engine, self.max_batch, self.linger_s = engine, max_batch, linger_s
        self._pending: list[tuple[GenRequest, asyncio.Future]] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self.stats = {"calls": 0, "requests": 0, "busy_s": 0.0}

    async def generate(self, req: GenRequest) -> Completion:
        if req.params.n != 1:
            raise ValueError(f"an agent turn generates one sample (n=1), got n={req.params.n}")
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = loop.create_task(self._run())
        fut: asyncio.Future = loop.create_future()
        self._pending.append((req, fut))
        self._wake.set()
        return await fut

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.linger_s)  # let episodes whose tools just finished join
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            batch = [(r, f) for r, f in batch if not f.done()]
            if batch:
                await self._run_batch(batch)
            if self._pending:
                self._wake.set()

    async def _run_batch(self, batch: list[tuple[GenRequest, asyncio.Future]]) -> None:
        t0 = time.perf_counter()
        try:
            outs = await asyncio.to_thread(self.engine.generate, [r for r, _ in batch])
        except Exception as e:  # noqa: BLE001  an engine failure fails these turns, not the run
            for r, f in batch:
                if not f.done():
                    f.set_result(Completion(r.id, 0, (), (), "", "error", f"{type(e).__name__}: {e}"))
            return
        finally:
            self.stats["busy_s"] += time.perf_counter() - t0
            self.stats["calls"] += 1
            self.stats["requests"] += len(batch)
        for (_, f), c in zip(batch, outs):
            if not f.done():
                f.set_result(c)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._worker = None
