"""`RaySandbox`: the `Sandbox` protocol over one `SandboxPoolActor` per node.

    sandbox = RaySandbox.create(cluster_cfg)          # one pool actor per alive node
    res = await sandbox.exec(["python3", "t.py"], files={"t.py": src}, limits=ExecLimits(wall_s=2))
    async with sandbox.session("host") as s: await s.run("ls")   # pinned to one node

Every execution is admitted globally (routing.py) and sent to the pool with the most
free capacity. Every remote call has a timeout (the execution's wall limit plus
`call_timeout_s`); a timeout's error names the node. A pool whose actor or node dies is
marked dead and its in-flight executions are resubmitted to the others (up to
`max_resubmits` times); a session on it raises `SandboxError`, which the agent loop
records as an `infra_error` episode and retries (on another node). With every pool
dead, `exec` raises `ClusterError` naming the dead nodes, and the run stops.

Executions routed to one node in the same event-loop turn travel together: one
`exec_many` call carries up to `exec_batch` of them (`_NodeBatch`), because a Ray call
costs the driver about 2 ms of CPU whatever it carries; a batch's answers come back
together. Each node is also sent `ahead` executions beyond its slots, which wait in the
node's own pool queue, so the node does not idle while answers travel back. A request the
pool refuses fails alone; a dead node or a timeout fails the whole batch, and each of its
executions is resubmitted on its own.

Limits: an execution that timed out is resubmitted once more but never cancelled on
its node (the node's own wall limit ends it); files travel through Ray's object store
with each call (no per-node file cache).
"""

from __future__ import annotations

import asyncio
import math
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Sequence

from posttrain.distributed.faults import ClusterError, RemoteTimeout, is_lost, unwrap
from posttrain.distributed.routing import NoCapacity, Router, Slot
from posttrain.distributed.wire import from_wire
from posttrain.errors import SandboxError
from posttrain.types import ExecLimits, ExecResult


class RemoteSession:
    """A `Session` whose every call goes to the one pool actor that holds it."""

    def __init__(self, box: "RaySandbox", slot: Slot, sid: str, timeout_s: float) -> None:
        self.box, self.slot, self.sid, self.timeout_s = box, slot, sid, timeout_s

    async def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        if not self.slot.alive:
            raise SandboxError(f"session on node {self.slot.name} lost: {self.slot.why_dead}")
        return await self.box.call(self.slot, self.slot.handle.session_call.remote(self.sid, method, args),
                                   (timeout or 0) + self.timeout_s, f"session.{method}")

    async def run(self, cmd: str, timeout: float | None = None) -> ExecResult:
        return await self._call("run", cmd, timeout, timeout=timeout)

    async def read_file(self, path: str) -> bytes:
        return await self._call("read_file", path)

    async def write_file(self, path: str, data: str | bytes) -> None:
        await self._call("write_file", path, data)

    async def snapshot(self) -> dict[str, str]:
        return await self._call("snapshot")

    async def diff(self) -> list:
        return await self._call("diff")

    async def close(self) -> None:
        if self.slot.alive:
            try:
                await self.box.call(self.slot, self.slot.handle.close_session.remote(self.sid), self.timeout_s, "close")
            except SandboxError:
                pass  # the node went away: its sessions went with it


class _NodeBatch:
    """Coalesces the executions sent to one node during one event-loop turn into `exec_many` calls."""

    def __init__(self, box: "RaySandbox", slot: Slot, max_batch: int) -> None:
        self.box, self.slot, self.max_batch = box, slot, max_batch
        self.pending: list[tuple[tuple, float, asyncio.Future]] = []
        self.scheduled = False
        self.calls = 0

    def submit(self, request: tuple, wall_s: float) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.pending.append((request, wall_s, fut))
        if len(self.pending) >= self.max_batch:
            self._flush()
        elif not self.scheduled:  # after every task runnable now has had its turn to add to the batch
            self.scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self.scheduled = False
        batch, self.pending = self.pending, []
        if batch:
            asyncio.get_running_loop().create_task(self._send(batch))

    async def _send(self, batch: list[tuple[tuple, float, asyncio.Future]]) -> None:
        s = self.slot
        rounds = math.ceil((s.capacity + s.ahead) / max(1, s.capacity))  # the last one may queue behind the rest
        timeout = max(w for _, w, _ in batch) * rounds + self.box.call_timeout_s
        self.calls += 1
        try:
            answers = await self.box.call(s, s.handle.exec_many.remote([r for r, _, _ in batch]), timeout,
                                          f"exec x{len(batch)}")
        except Exception as e:  # noqa: BLE001 - the node's failure is every batch-mate's failure
            for _, _, f in batch:
                if not f.done():
                    f.set_exception(e)
            return
        for (_, _, f), a in zip(batch, answers):
            if f.done():
                continue
            if isinstance(a, dict) and "__error__" in a:
                f.set_exception(SandboxError(a["__error__"]) if a.get("sandbox") else RuntimeError(a["__error__"]))
            else:
                f.set_result(from_wire(a))


class RaySandbox:
    def __init__(self, slots: list[Slot], call_timeout_s: float = 60.0, max_resubmits: int = 3,
                 queue_timeout_s: float = 600.0, exec_batch: int = 1) -> None:
        self.router = Router(slots, queue_timeout_s)
        self.call_timeout_s, self.max_resubmits = call_timeout_s, max_resubmits
        self.resubmitted = 0
        self.exec_batch = max(1, exec_batch)
        self._batches = {id(s): _NodeBatch(self, s, self.exec_batch) for s in slots}

    @classmethod
    def create(cls, ccfg: Any, nodes: list[dict] | None = None) -> "RaySandbox":
        from posttrain.distributed.placement import start_pools

        return cls(start_pools(ccfg, nodes), ccfg.call_timeout_s, ccfg.max_resubmits, ccfg.queue_timeout_s,
                   ccfg.exec_batch)

    async def _exec_on(self, slot: Slot, request: tuple, wall_s: float) -> ExecResult:
        if self.exec_batch == 1:
            return await self.call(slot, slot.handle.exec.remote(*request), wall_s + self.call_timeout_s, "exec")
        return await self._batches[id(slot)].submit(request, wall_s)

    async def call(self, slot: Slot, ref: Any, timeout_s: float, what: str) -> Any:
        """Await one remote call; a dead node or a timeout becomes an error naming the node."""
        try:
            return from_wire(await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout_s))
        except asyncio.TimeoutError:
            raise RemoteTimeout(f"sandbox pool on node {slot.name}: {what} did not answer within {timeout_s:.0f}s") \
                from None
        except Exception as e:  # noqa: BLE001 - classify Ray's errors into ours
            if is_lost(e):
                self.router.mark_dead(slot, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                raise SandboxError(f"sandbox pool on node {slot.name} is gone ({type(e).__name__})") from None
            cause = unwrap(e)
            if isinstance(cause, SandboxError):
                raise SandboxError(str(cause)) from None
            raise

    async def exec(self, cmd: Sequence[str], files: Any = None, stdin: str | bytes = b"",
                   limits: ExecLimits | None = None, image: str = "host", read_files: Sequence[str] = ()) -> ExecResult:
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        wall = (limits.wall_s if limits is not None else ExecLimits().wall_s)
        errors: list[str] = []
        for attempt in range(self.max_resubmits + 1):
            try:
                slot = await self.router.admit()
            except NoCapacity as e:
                raise ClusterError(str(e)) from None
            except asyncio.TimeoutError as e:
                return ExecResult(status="sandbox_error", error=f"cluster admission: {e}")
            t0, ok = time.perf_counter(), False
            try:
                request = (list(cmd), dict(files) if files else None, data, limits, image, tuple(read_files))
                res = await self._exec_on(slot, request, wall)
                ok = True
                return res
            except RemoteTimeout as e:
                errors.append(str(e))
            except SandboxError as e:
                if slot.alive:  # a bad request: the caller's error, not the node's
                    raise
                errors.append(str(e))
            finally:
                self.router.release(slot, time.perf_counter() - t0, ok)
            self.resubmitted += 1
        return ExecResult(status="sandbox_error", error="; ".join(errors)[-800:])

    def session(self, image: str = "host", limits: ExecLimits | None = None) -> Any:
        return self._session(image, limits)

    @asynccontextmanager
    async def _session(self, image: str, limits: ExecLimits | None) -> AsyncIterator[RemoteSession]:
        """Open on the least-loaded pool and stay there; the session holds one slot while open."""
        try:
            slot = await self.router.admit()
        except NoCapacity as e:
            raise ClusterError(str(e)) from None
        t0, ok = time.perf_counter(), False
        try:
            sid = await self.call(slot, slot.handle.open_session.remote(image, limits), self.call_timeout_s, "open_session")
            s = RemoteSession(self, slot, sid, self.call_timeout_s)
            try:
                yield s
                ok = True
            finally:
                await s.close()
        finally:
            self.router.release(slot, time.perf_counter() - t0, ok)

    def cluster_metrics(self) -> dict[str, float]:
        calls = sum(b.calls for b in self._batches.values())
        done = sum(s.done + s.failures for s in self.router.slots)
        return {**self.router.metrics(), "cluster/sandbox/resubmitted": self.resubmitted,
                "cluster/sandbox/exec_per_call": done / calls if calls else 0.0}

    async def close(self) -> None:
        import ray

        for s in self.router.alive():
            try:
                await asyncio.wait_for(asyncio.wrap_future(s.handle.close.remote().future()), 10)
            except Exception:  # noqa: BLE001 - closing a dying pool must not hide the run's result
                pass
            ray.kill(s.handle, no_restart=True)
