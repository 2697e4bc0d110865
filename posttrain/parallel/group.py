"""Rank 0 drives; every other rank follows. One command = one collective call of a handler.

    rank 0:   g = Driver(timeout_s); g.call("supervised_step", batch)   # broadcasts, then runs it too
    rank r>0: follow()                                                 # runs each handler rank 0 calls

Rank 0 runs the scheduler, rollout, verification, eval and writes the run directory; the
others only train. A command's name goes through the job's TCP store (a follower can wait
there indefinitely while rank 0 generates), its payload through `broadcast_object_list`
(bounded by the process group's timeout, like every collective that follows).

Liveness: each rank bumps `hb/<rank>` in the store once a second from a thread. A follower
whose driver's heartbeat stops for `timeout_s` fails (counted on its awake clock, so a job
suspended as a whole with Ctrl-Z outlives the pause: awake_clock.py); a driver whose collective
fails or times out names the rank whose heartbeat stopped (or, if none did, the exception).
Either way the failure is one `RankFailure` line and the process exits, so the job never hangs.

Limits: handlers must be registered under the same name on every rank (this module's
HANDLERS, filled by dcp.py here and by train/sharded/ (session, steps, sync)); one driver per
job (`current_driver`).
"""

from __future__ import annotations

import copyreg
import os
import sys
import threading
import time
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Callable, NoReturn

from posttrain.errors import PosttrainError
from posttrain.parallel.awake_clock import awake_now

HANDLERS: dict[str, Callable[["RankContext", Any], Any]] = {}


def _mapping_proxy(d: dict) -> Any:
    return MappingProxyType(d)


# Trajectories and task specs keep read-only mappings; payloads carry them to the followers.
copyreg.pickle(MappingProxyType, lambda m: (_mapping_proxy, (dict(m),)))
HEARTBEAT_S = 1.0
STOP_JOIN_S = 35.0  # > the store's 30 s timeout: a beat blocked on a dying store still returns


class RankFailure(PosttrainError, RuntimeError):
    """A rank died, hung or raised; the message names it."""


class RankContext:
    """What a rank keeps between commands: its model shard, optimiser, mesh, options."""

    def __init__(self) -> None:
        self.model: Any = None
        self.ref: Any = None  # the KL reference model (RL with rl.kl_coef > 0), sharded, frozen
        self.opt: Any = None
        self.mesh: Any = None
        self.opts: Any = None
        self.meter: Any = None  # accounting.CommMeter
        self.extra: dict[str, Any] = {}


def handler(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        HANDLERS[name] = fn
        return fn
    return deco


def _store() -> Any:
    import torch.distributed as dist

    return dist.TCPStore(os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]),
                         is_master=False, timeout=timedelta(seconds=30))


class Heartbeat:
    """Bumps this rank's counter and watches the others' (last time each one changed)."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        now = awake_now()  # a rank never heard from counts as silent since we started
        self.seen: dict[int, tuple[bytes | None, float]] = {r: (None, now) for r in range(world) if r != rank}
        self._stop = threading.Event()
        self._store = _store()
        self._store.set(f"hb/{rank}", "0")
        self._thread = threading.Thread(target=self._run, name="posttrain-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(HEARTBEAT_S):
            n += 1
            try:
                self._store.set(f"hb/{self.rank}", str(n))
                for r in range(self.world):
                    if r != self.rank and self._store.check([f"hb/{r}"]):
                        v = self._store.get(f"hb/{r}")
                        if self.seen.get(r, (None,))[0] != v:
                            self.seen[r] = (v, awake_now())
            except Exception:  # noqa: BLE001 - the store lives on rank 0; its loss shows up as stale beats
                pass

    def silent_for(self, r: int) -> float:
        """Seconds without a new beat from rank `r`, on this process's awake clock: a job suspended
        as a whole (Ctrl-Z) for longer than timeout_s does not find its peers dead after `fg`."""
        return awake_now() - self.seen[r][1] if r in self.seen else 0.0

    def stalest(self) -> tuple[int, float]:
        others = [r for r in range(self.world) if r != self.rank]
        r = max(others, key=self.silent_for)
        return r, self.silent_for(r)

    def stop(self) -> None:
        """Stop beating and wait for the thread: a daemon thread still inside a TCPStore call when
        the interpreter exits is unwound by pthread_exit through C++ code, which aborts the rank
        ("terminate called without an active exception", SIGABRT) after a clean run."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=STOP_JOIN_S)


class Driver:
    """Rank 0's side. `call(name, payload)` runs the handler on every rank and returns rank 0's result."""

    def __init__(self, timeout_s: float) -> None:
        import torch.distributed as dist

        self.timeout_s = timeout_s
        self.world = dist.get_world_size()
        self.ctx = RankContext()
        self.seq = 0
        self.broken = False  # after a failed collective the group is unusable: close() sends nothing
        self.beat = Heartbeat(0, self.world)
        self.store = _store()

    def call(self, name: str, payload: Any = None) -> Any:
        import torch.distributed as dist

        self.seq += 1
        try:
            self.store.set(f"cmd/{self.seq}", name)
            box = [payload]
            dist.broadcast_object_list(box, src=0)
            return HANDLERS[name](self.ctx, payload)
        except RankFailure:
            self.broken = True
            raise
        except Exception as e:  # noqa: BLE001 - a collective failed: find out which rank stopped
            self.broken = True
            raise RankFailure(self._blame(name, e)) from None

    def _blame(self, name: str, e: BaseException) -> str:
        deadline = time.monotonic() + 3 * HEARTBEAT_S + 1
        while time.monotonic() < deadline:  # a killed rank's heartbeat stops at once; let it show
            r, quiet = self.beat.stalest()
            if quiet > 2 * HEARTBEAT_S:
                return f"rank {r} of {self.world} stopped responding ({quiet:.0f} s without a heartbeat) during '{name}'"
            time.sleep(0.5)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"'{name}' failed on rank 0 of {self.world}: {type(e).__name__}: {first[:200]}"

    def close(self) -> None:
        import torch.distributed as dist

        try:
            if not self.broken:
                self.call("stop")
                self._await_followers()
        finally:
            self.beat.stop()
            if not self.broken:
                dist.destroy_process_group()

    def _await_followers(self) -> None:
        """Wait (up to STOP_JOIN_S) until every follower has torn down: the store lives in this
        process, and a follower whose heartbeat is inside a store call when it vanishes aborts
        at exit (SIGABRT, "terminate called without an active exception") after a clean run."""
        deadline = time.monotonic() + STOP_JOIN_S
        keys = [f"stopped/{r}" for r in range(1, self.world)]
        while time.monotonic() < deadline and not all(_posted(self.store, k) for k in keys):
            time.sleep(0.02)


@handler("stop")
def _stop(ctx: RankContext, payload: Any) -> None:
    return None


def _posted(store: Any, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:  # noqa: BLE001 - the store (on rank 0) is gone: the heartbeat check decides
        return False


def follow_and_exit(rank: int, world: int, timeout_s: float) -> NoReturn:
    """A follower process's whole life: `follow`, then leave without interpreter teardown.

    After "stop" the rank has nothing left to do, and tearing the interpreter down runs the
    destructors of torch.distributed's C++ objects in no fixed order: now and then one of them
    aborted a rank that had finished cleanly ("terminate called without an active exception",
    SIGABRT; seen about once in 4 runs of the sharded tests with 2 ranks on 2 cores). A Ray
    actor calls `follow` instead: its process belongs to Ray.
    """
    import signal

    # A follower ignores Ctrl-C (under torchrun the terminal's SIGINT reaches every rank): rank 0
    # checkpoints after the step in flight with this rank's help, then stops it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = follow(rank, world, timeout_s)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def follow(rank: int, world: int, timeout_s: float) -> int:
    """A follower's whole life: run rank 0's commands until "stop"; 0 on a clean end."""
    import torch.distributed as dist

    beat = Heartbeat(rank, world)
    store = _store()
    ctx = RankContext()
    seq = 0
    try:
        while True:
            seq += 1
            key = f"cmd/{seq}"
            while not _posted(store, key):  # poll: the driver may generate for minutes between steps
                if beat.silent_for(0) > timeout_s:
                    raise RankFailure(f"rank 0 of {world} stopped responding for {beat.silent_for(0):.0f} s; "
                                      f"rank {rank} gives up")
                time.sleep(0.05)
            name = store.get(key).decode()
            box = [None]
            dist.broadcast_object_list(box, src=0)
            HANDLERS[name](ctx, box[0])
            if name == "stop":
                dist.destroy_process_group()
                beat.stop()  # before the store's host (rank 0) may exit: see Driver._await_followers
                store.set(f"stopped/{rank}", "1")
                return 0
    except Exception as e:  # noqa: BLE001 - one line, then exit: the launcher names this rank
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"posttrain: error: rank {rank} of {world}: {type(e).__name__}: {msg[:300]}", file=sys.stderr, flush=True)
        return 1
    finally:
        beat.stop()


# ---- rank 0's one driver per job (train/sharded/session.py starts it; the CLI releases it) ----
_DRIVER: Driver | None = None
_CLOSED = False  # the followers were told to stop: no second driver in this job


def current_driver(timeout_s: float) -> Driver:
    global _DRIVER
    from posttrain.parallel.mesh import init_group

    if _CLOSED:
        raise RuntimeError("this job's sharded group was closed; a job trains through one group")
    if _DRIVER is None:
        import atexit

        init_group(timeout_s)
        _DRIVER = Driver(timeout_s)
        atexit.register(close_driver)  # followers stop cleanly however rank 0's command ends
    return _DRIVER


def close_driver() -> None:
    """Stop the followers once per job (their group is destroyed with it); at exit, or when
    rank 0's session closes."""
    global _DRIVER, _CLOSED
    if _DRIVER is not None:
        try:
            _DRIVER.close()
        except Exception:  # noqa: BLE001 - the job is ending; a dead follower was already named
            pass
        _DRIVER, _CLOSED = None, True


def release_followers(timeout_s: float) -> None:
    """At rank 0's exit: stop the followers, also when this command never trained (a resumed,
    finished run; an error before the first step), so that none waits out its timeout."""
    if _CLOSED:
        return
    if _DRIVER is None:
        try:
            current_driver(timeout_s)
        except Exception:  # noqa: BLE001 - the group is already gone: the followers see that themselves
            return
    close_driver()
