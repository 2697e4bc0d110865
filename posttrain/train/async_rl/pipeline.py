"""The producer side of asynchronous RL: batches generated ahead of the trainer, on a thread.

    pipe = Pipeline(st, k)                    # starts the producer thread and its event loop
    pipe.issue(step, tasks, version)          # trainer: batch `step`, to be generated with weights `version`
    batch = await pipe.take(step)             # trainer: waits until batch `step` is generated and scored
    pipe.publish(version, state)              # trainer: a new weights version the producer may install
    pipe.close()

Every batch is pinned to one weights version, chosen by the trainer when it issues it:
batch s is generated with version v(s) - K, where v(s) is the version the trainer holds
when it trains on batch s. So no sample is more than K versions old by construction, the
run is deterministic for a seed (the same batches, samples and updates whatever the
timing), and K = 0 is the synchronous loop run through this machinery. The producer runs
generation, sandbox verification and agent episodes (`rl.rollout_batch`) one batch at a
time, on its own thread and event loop: every coroutine that touches the engine or the
sandbox (held-out eval too) runs on that loop, under one lock, so the sandbox pool and the
verifier's semaphores stay bound to a single loop.

Partial rollouts (`partial=True`, rl.partial_rollouts): a batch starts with the newest
weights on the board (never older than its pin) and the engine polls for newer ones between
decode steps (FastEngine.set_weight_source), up to `limit`, the version the trainer holds
when it trains on that batch. So its oldest token is still at most K versions old, later
tokens are fresher, and each token carries its version (Turn.token_versions). The run is then
no longer deterministic: which tokens see which weights depends on timing.

Limits: one engine, one batch in generation at a time; a version a batch was issued with
must still be on the board when the producer reaches it (the trainer issues in step order
and the producer installs in step order, so it is).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from posttrain.types import Task, Trajectory


@dataclass
class Batch:
    step: int
    tasks: list[Task]
    version: int  # the weights version it is (to be) generated with; partial: the oldest its tokens saw
    limit: int = -1  # partial rollouts: the newest version it may take mid-batch (-1: version + K)
    trajs: list[Trajectory] | None = None  # set once generated and scored
    generate_s: float = 0.0
    verify_s: float = 0.0
    regenerated: bool = False  # restored without samples, or too stale: generated again
    done: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class Pipeline:
    def __init__(self, st: Any, max_staleness: int, partial: bool = False) -> None:
        self.st, self.k, self.partial = st, max_staleness, partial
        self._latest: tuple[int, Mapping[str, Any]] | None = None  # newest published (partial), under _latest_lock
        self._latest_lock = threading.Lock()  # the engine polls from whichever thread runs generate
        self.batches: dict[int, Batch] = {}  # issued and not yet taken, by step
        self.board: dict[int, Mapping[str, Any]] = {}  # version -> weights snapshot (producer loop only)
        self.idle_s = 0.0  # producer time spent waiting for an issued batch or its weights
        self.busy_s = 0.0  # producer time spent generating and scoring
        self.loop = asyncio.new_event_loop()
        self._lock: asyncio.Lock | None = None  # the engine, on the producer loop
        self._issued: asyncio.Queue | None = None
        self._new_version: asyncio.Event | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rl-producer", daemon=True)
        self.thread.start()
        self._ready.wait()

    # ---- producer thread ------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._lock, self._issued, self._new_version = asyncio.Lock(), asyncio.Queue(), asyncio.Event()
        self._task = self.loop.create_task(self._produce())
        self._ready.set()
        try:
            self.loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass  # close(): batches issued but not needed any more (a stop, an interrupt)
        finally:
            self.loop.close()

    async def _produce(self) -> None:
        from posttrain.train.batch_source import rollout_batch

        while True:
            t0 = time.perf_counter()
            b = await self._issued.get()
            while b.trajs is None and not self._installable(b):
                self._new_version.clear()
                await self._new_version.wait()
            self.idle_s += time.perf_counter() - t0
            if b.trajs is not None:  # restored from a checkpoint with its samples
                b.done.set_result(b)
                continue
            t1 = time.perf_counter()
            try:
                async with self._lock:
                    if self.partial:
                        b.version = max(v for v in self.board if b.version <= v <= self._limit(b))
                    self._install(b.version)
                    self._watch(b)
                    try:
                        trajs, t_gen, t_ver = await rollout_batch(self.st, b.tasks, b.step)
                    finally:
                        self._watch(None)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # noqa: BLE001 - handed to the trainer, which raises it
                b.done.set_exception(e)
                continue
            b.trajs, b.generate_s, b.verify_s = trajs, t_gen - t1, t_ver - t_gen
            self.busy_s += time.perf_counter() - t1
            for v in [v for v in self.board if v < b.version]:  # later batches never need older weights
                del self.board[v]
            b.done.set_result(b)

    def _limit(self, b: Batch) -> int:
        return b.limit if b.limit >= 0 else b.version + self.k

    def _installable(self, b: Batch) -> bool:
        if self.partial:
            return any(b.version <= v <= self._limit(b) for v in self.board)
        return b.version in self.board

    def _watch(self, b: Batch | None) -> None:
        """Partial rollouts: let the engine take versions up to b's limit between decode steps."""
        if not self.partial:
            return
        limit = None if b is None else self._limit(b)

        def newest() -> tuple[int, Mapping[str, Any]] | None:
            with self._latest_lock:
                got = self._latest
            return got if got is not None and got[0] <= limit else None

        self.st.engine.set_weight_source(None if b is None else newest)

    def _install(self, version: int) -> None:
        eng = self.st.engine
        if eng.weights_version != version:
            eng.load_weights(self.board[version], version)

    def _put_version(self, version: int, state: Mapping[str, Any]) -> None:
        self.board[version] = state
        self._new_version.set()

    # ---- trainer side ---------------------------------------------------------------------
    def issue(self, step: int, tasks: list[Task], version: int, trajs: list[Trajectory] | None = None,
              regenerated: bool = False, limit: int = -1) -> Batch:
        b = Batch(step, list(tasks), version, limit, trajs, regenerated=regenerated)
        self.batches[step] = b
        self.loop.call_soon_threadsafe(self._issued.put_nowait, b)
        return b

    async def take(self, step: int) -> Batch:
        """Batch `step`, generated; it stays in `batches` (and in a checkpoint) until `consumed(step)`."""
        return await asyncio.wrap_future(self.batches[step].done)

    def consumed(self, step: int) -> None:
        self.batches.pop(step, None)

    def publish(self, version: int, state: Mapping[str, Any]) -> None:
        """Offer weights `version` (a snapshot the trainer no longer mutates) to the producer."""
        with self._latest_lock:
            self._latest = (version, state)
        self.loop.call_soon_threadsafe(self._put_version, version, state)

    async def on_engine(self, version: int, state: Mapping[str, Any] | None,
                        fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run `fn()` on the producer loop with the engine holding `version` (eval, a regeneration)."""
        async def job() -> Any:
            async with self._lock:
                if state is not None:
                    self.board[version] = state
                self._install(version)
                return await fn()

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job(), self.loop))

    def finished(self) -> list[Batch]:
        return [b for b in self.batches.values() if b.trajs is not None]

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self._task.cancel)
            self.thread.join(timeout=5)  # a generation in flight may outlive it: the thread is a daemon
