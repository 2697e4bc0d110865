"""A second model inside a run (judge, simulated user, teacher) as a service.

    svc = open_service("judge", SecondModelConfig(path="models/smollm2"))     # in-process engine
    svc = open_service("user", SecondModelConfig(url="http://127.0.0.1:8001/v1", model="smollm2"))
    replies = await svc.chat([[{"role": "user", "content": "2+2?"}], ...])  # one ServiceReply each
    svc.close()

A backend (`ChatBackend`, registered under the `model_backend` kind: `local`, `openai`) turns
a batch of conversations into texts, one result or exception per conversation. `ModelService`
wraps any backend with what a run needs from a model it does not train: a concurrency limit
(batches in flight), a timeout per batch, retries of the items that failed, and statistics
(calls, seconds, failures) for the step-time share. A conversation that still fails comes
back as `ServiceReply(ok=False, error=...)`: callers record it as an infrastructure error
(`VerifyResult.infra`), never as a score.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from posttrain.config_schema import SecondModelConfig
from posttrain.errors import ConfigError
from posttrain.registry import registry

Conversation = Sequence[Mapping[str, str]]  # [{"role": "system"|"user"|"assistant", "content": str}]


@dataclass(frozen=True)
class ChatParams:
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int | None = None


@dataclass(frozen=True)
class ServiceReply:
    text: str
    ok: bool = True
    error: str = ""
    attempts: int = 1


@runtime_checkable
class ChatBackend(Protocol):
    """One batch of conversations in, one text (or the exception that stopped it) per conversation out."""

    model_id: str  # what the cache keys and reports name: a directory, or url#model

    async def chat_batch(self, convs: Sequence[Conversation], params: ChatParams) -> list[str | BaseException]: ...

    def close(self) -> None: ...


def model_backend(name: str):
    return registry("model_backend").register(name)


@dataclass
class ServiceStats:
    calls: int = 0  # backend batches
    items: int = 0  # conversations answered (ok or not)
    failures: int = 0  # conversations that failed after every retry
    retries: int = 0
    busy_s: float = 0.0  # wall seconds with at least this call in flight (summed over calls)
    # wall seconds with at least one call inside the backend (the union of the calls' spans, no queueing):
    # what the model cost the run; items / active_s is its throughput inside the run
    active_s: float = 0.0
    latencies: list[float] = field(default_factory=list)


class ModelService:
    """A backend behind a concurrency limit, a per-batch timeout and retries."""

    def __init__(self, name: str, backend: ChatBackend, cfg: SecondModelConfig) -> None:
        self.name, self.backend, self.cfg = name, backend, cfg
        self.stats = ServiceStats()
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: object = None
        self._inflight, self._active_since = 0, 0.0  # stats.active_s: calls inside the backend now, since when

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()  # a semaphore belongs to the loop that first awaits it
        if self._sem is None or self._sem_loop is not loop:
            self._sem, self._sem_loop = asyncio.Semaphore(self.cfg.concurrency), loop
        return self._sem

    def params(self, **over: Any) -> ChatParams:
        base = {"max_new_tokens": self.cfg.max_new_tokens, "temperature": self.cfg.temperature}
        return ChatParams(**{**base, **over})

    async def _attempt(self, convs: list[Conversation], params: ChatParams) -> list[str | BaseException]:
        t0 = time.perf_counter()
        async with self._semaphore():
            if self._inflight == 0:
                self._active_since = time.perf_counter()
            self._inflight += 1
            try:
                async with asyncio.timeout(self.cfg.timeout_s):
                    out = await self.backend.chat_batch(convs, params)
            except (asyncio.TimeoutError, TimeoutError):
                out = [TimeoutError(f"{self.name} ({self.model_id}) timed out after {self.cfg.timeout_s}s")] * len(convs)
            except Exception as e:  # the backend itself broke (connection refused, engine error): every item failed
                out = [e] * len(convs)
            finally:
                self._inflight -= 1
                if self._inflight == 0:
                    self.stats.active_s += time.perf_counter() - self._active_since
        dt = time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.busy_s += dt
        self.stats.latencies.append(dt)
        if len(out) != len(convs):
            return [RuntimeError(f"{self.name}: backend returned {len(out)} results for {len(convs)}")] * len(convs)
        return out

    async def chat(self, convs: Sequence[Conversation], params: ChatParams | None = None) -> list[ServiceReply]:
        """One reply per conversation, in order; the failed ones retried `cfg.retries` times."""
        params = params or self.params()
        results: list[ServiceReply | None] = [None] * len(convs)
        todo = list(range(len(convs)))
        last: dict[int, BaseException] = {}
        for attempt in range(self.cfg.retries + 1):
            if not todo:
                break
            if attempt:
                self.stats.retries += len(todo)
                await asyncio.sleep(self.cfg.backoff_s * 2 ** (attempt - 1))
            chunks = [todo[i:i + self.cfg.batch] for i in range(0, len(todo), self.cfg.batch)]
            outs = await asyncio.gather(*(self._attempt([convs[i] for i in c], params) for c in chunks))
            failed = []
            for chunk, out in zip(chunks, outs):
                for i, r in zip(chunk, out):
                    if isinstance(r, BaseException):
                        last[i] = r
                        failed.append(i)
                    else:
                        results[i] = ServiceReply(str(r), attempts=attempt + 1)
            todo = failed
        for i in todo:
            e = last[i]
            results[i] = ServiceReply("", ok=False, error=f"{type(e).__name__}: {e}"[:500], attempts=self.cfg.retries + 1)
            self.stats.failures += 1
        self.stats.items += len(convs)
        return [r for r in results if r is not None]

    async def chat_one(self, conv: Conversation, params: ChatParams | None = None) -> ServiceReply:
        return (await self.chat([conv], params))[0]

    def close(self) -> None:
        self.backend.close()


def open_service(name: str, cfg: SecondModelConfig) -> ModelService:
    """The service `name` (judge, user, teacher, ...) for one entry of a run's `models:`."""
    factory = registry("model_backend").get(cfg.backend_name())
    return ModelService(name, factory(cfg), cfg)


# ---- the run's named services -----------------------------------------------------------------
# Verifiers are built from a task's Spec and cannot be handed objects, so a run opens its
# `models:` once (`ServicePool`) and a judge verifier finds "judge" here by name.
_ACTIVE: dict[str, ModelService] = {}


def served(models: Mapping[str, SecondModelConfig]) -> dict[str, SecondModelConfig]:
    """The models a run serves by name: all but the teacher, whose per-token logprobs distillation reads
    in-process (train/distill.py load_teacher), never through a chat service."""
    return {name: c for name, c in models.items() if name != "teacher"}


class ServicePool:
    """Opens every model a run names and makes them findable by name until closed."""

    def __init__(self, models: Mapping[str, SecondModelConfig]) -> None:
        self.services = {n: open_service(n, c) for n, c in models.items()}

    def __enter__(self) -> "ServicePool":
        _ACTIVE.update(self.services)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for n, s in self.services.items():
            if _ACTIVE.get(n) is s:
                del _ACTIVE[n]
            s.close()


def register_service(svc: ModelService) -> None:
    """Make `svc` findable by its name (benchmarks and tests that build one by hand)."""
    _ACTIVE[svc.name] = svc


def unregister_service(name: str) -> None:
    _ACTIVE.pop(name, None)


def active_service(name: str) -> ModelService:
    if name not in _ACTIVE:
        known = ", ".join(sorted(_ACTIVE)) or "none open"
        raise ConfigError(f"second model {name!r} is not open in this run (models: {known}); name it under `models:`")
    return _ACTIVE[name]
