"""The Engine contract: token ids in, token ids plus logprobs out, versioned weights.

    outs = engine.generate([GenRequest(prompt_ids, SamplingParams(temperature=1.0, n=8))])
    engine.load_weights(policy.state_dict(), version=step)   # verified: raises on mismatch

`Completion.logprobs[i]` is log p(token_ids[i] | prefix) under the engine's weights at
temperature 1 with no top-p/top-k warping: the quantity the trainer recomputes for the
importance ratio. Backends must match the trainer's recomputation within 1e-4 (fp32, CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Protocol, Sequence, runtime_checkable

FinishReason = Literal["stop", "length", "deadline", "error"]


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 32
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1  # samples per request (a GRPO group shares one prompt prefill)

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")


@dataclass(frozen=True)
class GenRequest:
    prompt_ids: tuple[int, ...]
    params: SamplingParams = field(default_factory=SamplingParams)
    id: str = ""
    deadline_s: float | None = None  # seconds from submission; past it -> "deadline"
    images: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Completion:
    request_id: str
    index: int  # sample index within the request's n
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finish_reason: FinishReason
    error: str = ""
    # the weights version each token was sampled under; () from an engine that does not report it
    # (all tokens then carry the version the engine held when the call began)
    token_versions: tuple[int, ...] = ()


def oldest_version(c: Completion, default: int) -> int:
    """The oldest weights version among `c`'s tokens: what its staleness is counted from."""
    return min(c.token_versions, default=default)


@runtime_checkable
class Engine(Protocol):
    """Generates completions for requests and installs new weights; `weights_version` is the
    version it holds. What more an engine can do is a Protocol of its own, below."""

    weights_version: int

    def generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        """One Completion per (request, sample index), ordered request-major."""
        ...

    def load_weights(self, state: Mapping[str, Any], version: int) -> None:
        """Install `state` as weights `version`; verify it and raise on any mismatch."""
        ...


# ---- capabilities beyond `Engine`: each a Protocol an engine implements publicly; callers check
# `isinstance(engine, X)` (or `issubclass(factory, X)` before building one), never getattr/hasattr.


@runtime_checkable
class EngineInfo(Protocol):
    """An engine that knows its model's context length (tokens, prompt and completion together)."""

    max_len: int


@runtime_checkable
class DescribesModel(Protocol):
    """An engine that can name its model for error messages ("LlamaForCausalLM (runs/x/sft-model)")."""

    model_label: str


@runtime_checkable
class MatmulPrecision(Protocol):
    """An engine that says what its weight matmuls run in ("float32" | "bfloat16"; `auto` resolved):
    the RL update follows a bf16 choice under `trainer.precision: auto` (train/lora.resolve_precision)."""

    matmul_dtype: str


@runtime_checkable
class WeightReceiver(Protocol):
    """Takes weights in buckets (weight_sync.py): begin_weights(version) -> an install to feed and commit."""

    def begin_weights(self, version: int) -> Any: ...


@runtime_checkable
class InflightWeights(Protocol):
    """Takes newer weights between decode steps of a running batch (rl.partial_rollouts)."""

    def set_weight_source(self, source: Any) -> None: ...

    def inflight_updates(self) -> int:
        """Weights taken in the middle of a batch so far."""
        ...


@runtime_checkable
class ClusterMetrics(Protocol):
    """A part spread over a cluster (Ray engines, sandboxes): per-node throughput, queue depth, failures."""

    def cluster_metrics(self) -> dict[str, float]: ...


@runtime_checkable
class StreamingEngine(Protocol):
    """An engine driven one scheduling step at a time (serve/loop.py): requests join a running batch.

    All calls come from one thread, inside `with engine.serving():`, which holds the engine for
    the server while it has work. `submit` queues a request (an error string refuses it);
    `step()` expires, admits and decodes once, returning what was produced since the last call."""

    weights_version: int

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The token ids that end a turn (the chat layer strips them)."""
        ...

    def open_lanes(self, lanes: int | None, lane_len: int | None) -> None: ...

    def serving(self) -> Any: ...

    def submit(self, rid: int, req: GenRequest) -> str: ...

    def cancel(self, rid: int) -> None: ...

    def step(self, admit: bool = True) -> tuple[list[tuple[int, int, list[int], list[float]]],
                                                 list[tuple[int, int, Completion]]]: ...

    def running(self) -> int: ...

    def queued(self) -> int: ...

    def release(self, rid: int) -> None: ...

    def weights_mismatch(self, state: Mapping[str, Any]) -> str:
        """Why `state` cannot be installed into the served model ("" if it fits)."""
        ...

    def install_serving(self, state: Mapping[str, Any], version: int) -> Any:
        """Install `state` as `version` from the serving thread (inside `serving()`)."""
        ...
