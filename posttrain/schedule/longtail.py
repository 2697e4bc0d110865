"""Long-tail queues: run rollout jobs so that short tasks never wait behind long ones.

    runner = LongTailRunner(run, predictor=DurationPredictor(), short_concurrency=14, long_concurrency=2)
    for job in jobs: runner.submit(job, version=weights_version)
    outcomes = await runner.collect_step(version=weights_version)   # short lane done; longs carry over

- **Two lanes.** A job predicted long (`DurationPredictor`, by domain and prompt length)
  goes to the long lane, which has its own concurrency budget; everything else takes the
  short lane. Neither lane's jobs ever occupy the other's slots.
- **Promotion.** A job that the predictor got wrong, still running in the short lane
  past the long threshold, is moved to the long lane's account, and its short slot is
  handed to the next short job at once. The long lane may run over budget until it
  drains; it then starts nothing new until it is back under.
- **Carry-over.** `collect_step()` returns once the short lane is empty (`collect(n)`
  once `n` results are ready); a long job that misses the step boundary keeps running
  and is delivered by a later call, with
  its staleness (weight versions between submission and delivery) on the outcome.
  Results staler than `max_staleness` come back with status `stale`, never trained on.
- **Timeouts.** Each attempt is cut at the job's timeout and recorded as `timeout`;
  a timed-out job never comes back as a scored result.
- **Retries.** An infrastructure failure (an exception `is_infra` accepts, or a result
  `is_infra_result` flags) is retried up to `max_retries` times, then recorded as
  `infra_error`. Other exceptions are recorded as `error`; nothing is raised.

Does not: preempt or pause a running job (a long job started in the short lane keeps
its CPU; only the slot accounting moves), limit memory, or persist queued jobs across a
restart (resubmit them; the scheduler's pending set expires on its own).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Literal

from posttrain.schedule.duration import DurationPredictor
from posttrain.types import Task

Status = Literal["ok", "timeout", "infra_error", "error", "stale"]
Lane = Literal["short", "long"]


class InfraError(Exception):
    """Raise from a run function for a retryable infrastructure failure."""


@dataclass(frozen=True)
class Job:
    key: str  # task id
    domain: str
    length: int = 0  # prompt length: a duration feature
    payload: Any = None  # whatever the run function needs (the Task itself, usually)
    timeout_s: float | None = None  # None -> the runner's default

    @classmethod
    def from_task(cls, task: Task, payload: Any = None) -> "Job":
        length = sum(len(m.content) for m in task.prompt)
        return cls(task.id, task.domain, length, task if payload is None else payload, task.limits.timeout_s)


@dataclass(frozen=True)
class Outcome:
    job: Job
    status: Status
    result: Any  # the run function's value when status is ok (or the last infra result)
    error: str
    lane: Lane  # the lane it finished in
    promoted: bool  # started short, ran past the long threshold
    attempts: int
    version: int  # weights version at submission
    staleness: int  # delivery version - submission version
    submitted_at: float
    started_at: float
    finished_at: float

    @property
    def wait_s(self) -> float:
        return self.started_at - self.submitted_at

    @property
    def latency_s(self) -> float:
        return self.finished_at - self.submitted_at


@dataclass
class _Entry:
    job: Job
    version: int
    submitted_at: float
    lane: Lane
    started_at: float = 0.0
    promoted: bool = False
    running: bool = False


def _default_is_infra_result(result: Any) -> bool:
    return getattr(result, "infra_error", False) is True


class LongTailRunner:
    def __init__(self, run: Callable[[Job], Awaitable[Any]], *, predictor: DurationPredictor | None = None,
                 short_concurrency: int = 4, long_concurrency: int = 1, route: bool = True,
                 timeout_s: float = 60.0, max_retries: int = 2, max_staleness: int | None = None,
                 is_infra: Callable[[BaseException], bool] | None = None,
                 is_infra_result: Callable[[Any], bool] = _default_is_infra_result,
                 long_backlog: int | None = None) -> None:
        if short_concurrency < 1 or (route and long_concurrency < 1):
            raise ValueError(f"LongTailRunner needs short_concurrency >= 1 and, when routing, long_concurrency "
                             f">= 1; got {short_concurrency}, {long_concurrency}")
        if timeout_s <= 0 or max_retries < 0:
            raise ValueError(f"LongTailRunner needs timeout_s > 0 and max_retries >= 0; got {timeout_s}, {max_retries}")
        if long_backlog is not None and long_backlog < 1:
            raise ValueError(f"LongTailRunner needs long_backlog >= 1 or None; got {long_backlog}")
        # Predicted-long jobs beyond this many queued or running in the long lane start in the short
        # lane instead (promotion still moves a slow one out of the step's way). Without it, a domain
        # whose tasks are long a third of the time sent every task to the long lane: the short lane
        # stayed empty, steps ended at once with nothing to train, and the long queue grew without
        # bound (benchmarks/longtail_loop.py). None: no limit (the simulator defers such draws itself).
        self.long_backlog = long_backlog
        self._run_fn = run
        self.predictor = predictor if predictor is not None else DurationPredictor()
        self.route, self.timeout_s, self.max_retries, self.max_staleness = route, timeout_s, max_retries, max_staleness
        self._is_infra = is_infra or (lambda e: isinstance(e, (InfraError, ConnectionError)))
        self._is_infra_result = is_infra_result
        self._cap: dict[Lane, int] = {"short": short_concurrency, "long": long_concurrency}
        self._busy: dict[Lane, int] = {"short": 0, "long": 0}
        self._queues: dict[Lane, list[_Entry]] = {"short": [], "long": []}
        self._ready: list[Outcome] = []
        self._tasks: dict[asyncio.Task[None], _Entry] = {}
        self._changed = asyncio.Event()
        self._window: list[Outcome] = []  # delivered since the last metrics() call

    # -- submission ------------------------------------------------------------------------
    def lane_for(self, job: Job) -> Lane:
        if not (self.route and self.predictor.is_long(job.domain, job.length)):
            return "short"
        full = self.long_backlog is not None and self.backlog("long") >= self.long_backlog
        return "short" if full else "long"

    def backlog(self, lane: Lane) -> int:
        """Jobs queued or running in `lane`: what admission control looks at."""
        return len(self._queues[lane]) + self._busy[lane]

    def in_flight(self) -> int:
        return self.backlog("short") + self.backlog("long")

    def submit(self, job: Job, version: int = 0) -> Lane:
        """Queue `job` (call from inside the running loop); returns the lane it went to."""
        lane = self.lane_for(job)
        now = asyncio.get_running_loop().time()
        self._queues[lane].append(_Entry(job, version, now, lane))
        self._pump()
        return lane

    def _pump(self) -> None:
        for lane in ("short", "long"):
            q = self._queues[lane]
            while q and self._busy[lane] < self._cap[lane]:
                entry = q.pop(0)
                self._busy[lane] += 1
                task = asyncio.get_running_loop().create_task(self._run(entry))
                self._tasks[task] = entry
                task.add_done_callback(self._forget)

    def _forget(self, task: "asyncio.Task[None]") -> None:
        self._tasks.pop(task, None)

    # -- execution -------------------------------------------------------------------------
    async def _run(self, entry: _Entry) -> None:
        loop = asyncio.get_running_loop()
        entry.started_at, entry.running = loop.time(), True
        timer = None
        limit = self.predictor.threshold()
        if self.route and entry.lane == "short" and math.isfinite(limit):
            timer = loop.call_later(limit, self._promote, entry)
        try:
            status, result, error, attempts = await self._attempts(entry.job)
        finally:
            entry.running = False
            if timer is not None:
                timer.cancel()
            self._busy[entry.lane] -= 1
        finished = loop.time()
        if status in ("ok", "timeout"):  # a timeout is a lower bound, and still worth routing on
            self.predictor.update(entry.job.domain, entry.job.length, finished - entry.started_at)
        self._ready.append(Outcome(entry.job, status, result, error, entry.lane, entry.promoted, attempts,
                                   entry.version, 0, entry.submitted_at, entry.started_at, finished))
        self._changed.set()
        self._pump()

    def _promote(self, entry: _Entry) -> None:
        """A mispredicted long job: move its slot to the long lane's account."""
        if not entry.running or entry.lane != "short":
            return
        self._busy["short"] -= 1
        self._busy["long"] += 1
        entry.lane, entry.promoted = "long", True
        self._changed.set()  # a step waiting for the short lane to drain may be done now
        self._pump()

    async def _attempts(self, job: Job) -> tuple[Status, Any, str, int]:
        timeout = job.timeout_s if job.timeout_s and job.timeout_s > 0 else self.timeout_s
        error = ""
        for attempt in range(1, self.max_retries + 2):
            try:
                result = await asyncio.wait_for(self._run_fn(job), timeout)
            except asyncio.TimeoutError:
                return "timeout", None, f"timed out after {timeout:g}s", attempt
            except Exception as e:  # noqa: BLE001 -- one bad job must never crash the run
                error = f"{type(e).__name__}: {e}"
                if self._is_infra(e):
                    continue
                return "error", None, error, attempt
            if self._is_infra_result(result):
                error = f"infra error result: {getattr(getattr(result, 'verify', None), 'reason', '')}"
                if attempt <= self.max_retries:
                    continue
                return "infra_error", result, error, attempt
            return "ok", result, "", attempt
        return "infra_error", None, error, self.max_retries + 1

    # -- delivery --------------------------------------------------------------------------
    async def collect(self, n: int, version: int = 0, timeout: float | None = None) -> list[Outcome]:
        """Wait for `n` finished jobs (fewer if nothing else is in flight or `timeout` passes).

        Outcomes come oldest-finished first; the rest stay ready for the next call.
        """
        await self._wait_while(lambda: len(self._ready) < n and self.in_flight() > 0, timeout)
        out, self._ready = self._ready[:n], self._ready[n:]
        out = [self._deliver(o, version) for o in out]
        self._window.extend(out)
        return out

    async def _wait_while(self, busy: Callable[[], bool], timeout: float | None) -> None:
        """Wake on every state change until `busy()` is false or `timeout` seconds pass."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while busy():
            self._changed.clear()
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                return

    async def collect_step(self, version: int = 0, timeout: float | None = None) -> list[Outcome]:
        """The step boundary: wait until the short lane is empty, return everything ready.

        Long jobs still running carry over to a later call; the caller tops the batch up
        with replacement draws (`Scheduler.draw_count`) if it needs a fixed size.
        """
        await self._wait_while(lambda: self.backlog("short") > 0, timeout)
        return await self.collect(len(self._ready), version)

    def _deliver(self, o: Outcome, version: int) -> Outcome:
        stale = version - o.version
        status = o.status
        if status == "ok" and self.max_staleness is not None and stale > self.max_staleness:
            status = "stale"
        return replace(o, staleness=stale, status=status)

    async def close(self) -> list[Job]:
        """Cancel running jobs and drop queued ones; returns every job that did not finish."""
        left = [e.job for q in self._queues.values() for e in q]
        for q in self._queues.values():
            q.clear()
        running = list(self._tasks.items())
        for t, _ in running:
            t.cancel()
        if running:
            await asyncio.gather(*(t for t, _ in running), return_exceptions=True)
        return left + [e.job for _, e in running]

    # -- visibility ------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Queue waits, staleness and outcomes over results delivered since the last call."""
        out: dict[str, float] = {"queue/backlog/short": float(self.backlog("short")),
                                 "queue/backlog/long": float(self.backlog("long"))}
        w = self._window
        for lane in ("short", "long"):
            waits = sorted(o.wait_s for o in w if o.lane == lane)
            if waits:
                out[f"queue/wait_p50_s/{lane}"] = waits[len(waits) // 2]
                out[f"queue/wait_max_s/{lane}"] = waits[-1]
        if w:
            out["queue/staleness_mean"] = sum(o.staleness for o in w) / len(w)
            out["queue/staleness_max"] = float(max(o.staleness for o in w))
            out["queue/promoted"] = float(sum(o.promoted for o in w))
            out["queue/retries"] = float(sum(o.attempts - 1 for o in w))
            for s in ("ok", "timeout", "infra_error", "error", "stale"):
                out[f"queue/{s}_frac"] = sum(o.status == s for o in w) / len(w)
        self._window = []
        return out
