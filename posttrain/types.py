"""Frozen dataclasses shared by every layer.

No torch, no heavy imports: everything here must be importable in a sandbox worker, a
Ray actor or the CLI's `--help` path in microseconds. Values are JSON-friendly so a
trajectory can be stored, exported and replayed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Mapping

Role = Literal["system", "user", "assistant", "tool"]
ExecStatus = Literal["ok", "nonzero_exit", "timeout", "oom", "output_limit", "sandbox_error"]
VerifyStatus = Literal["ok", "infra_error"]
Boundary = Literal["engine", "tool", "sandbox", "verifier", "parse", "budget"]


def freeze(value: Any) -> Any:
    """Recursively turn dicts into read-only mappings and lists into tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


_PLAIN = (int, float, str, bool, type(None))


def thaw(value: Any) -> Any:
    """Inverse of `freeze`: plain dicts and lists, ready for `json.dumps`."""
    t = type(value)
    if t in _PLAIN:  # the common cases first, by exact type: an ABC isinstance check costs ~1 us
        return value
    if t is not type and hasattr(t, "__dataclass_fields__"):
        return {f.name: thaw(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if t is dict or t is MappingProxyType or isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        if all(type(v) in _PLAIN for v in value):  # token ids, logprobs: no per-element recursion
            return list(value)
        return [thaw(v) for v in value]
    return value


def content_hash(obj: Any) -> str:
    """sha256 of the canonical JSON form (sorted keys), first 16 hex digits."""
    blob = json.dumps(thaw(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Spec:
    """A component named in a registry plus its constructor arguments."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", freeze(self.args))

    def __hash__(self) -> int:
        return hash(content_hash(self))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and thaw(self) == thaw(other)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze(self.arguments))


@dataclass(frozen=True)
class Attachment:
    """A binary attachment (an image) referenced by sha256; bytes live beside the task file."""

    kind: str  # "image"
    sha256: str
    path: str = ""  # relative to the task file, or absolute
    mime: str = "image/png"


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    name: str = ""  # tool name for role == "tool"


@dataclass(frozen=True)
class Limits:
    """Per-task budget for generation and agent episodes."""

    max_steps: int = 1
    max_new_tokens: int = 32
    timeout_s: float = 30.0


@dataclass(frozen=True)
class ExecLimits:
    """Per-execution sandbox limits. Values <= 0 are rejected by the sandbox."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 512
    pids: int = 64
    fsize_mb: int = 64
    nofile: int = 256
    output_bytes: int = 1 << 20
    workspace_mb: int = 64


@dataclass(frozen=True)
class Environment:
    """What a task needs from the sandbox: an image digest, starting files, tools."""

    image: str = "host"
    files: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", freeze(self.files))


@dataclass(frozen=True, eq=False)
class Task:
    """One verifiable task. Frozen; equality and hash go through `version`."""

    id: str
    domain: str
    prompt: tuple[Message, ...]
    verifier: Spec
    difficulty: float = 0.0
    environment: Environment = field(default_factory=Environment)
    limits: Limits = field(default_factory=Limits)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    oracle: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", freeze(self.metadata))
        object.__setattr__(self, "prompt", tuple(self.prompt))

    @property
    def version(self) -> str:
        cached = self.__dict__.get("_version")
        if cached is None:
            cached = content_hash(self)
            object.__setattr__(self, "_version", cached)
        return cached

    def __hash__(self) -> int:
        return hash(self.version)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and other.version == self.version


def is_multi_step(task: Task) -> bool:
    """Whether `task` runs as a multi-step agent episode (tools, terminal, scene) rather than one
    generation: the single definition every layer reads (rollout/entry.py dispatches on it)."""
    return task.limits.max_steps > 1


@dataclass(frozen=True)
class FileChange:
    path: str
    change: Literal["added", "modified", "deleted"]
    size: int = 0
    sha256: str = ""


@dataclass(frozen=True)
class ExecResult:
    status: ExecStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_bytes: int = 0
    files_changed: tuple[FileChange, ...] = ()
    image_digest: str = ""
    limits: ExecLimits = field(default_factory=ExecLimits)
    enforcement: Mapping[str, str] = field(default_factory=dict)  # limit -> mechanism
    files: Mapping[str, str] = field(default_factory=dict)  # contents asked for
    error: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "enforcement", freeze(self.enforcement))
        object.__setattr__(self, "files", freeze(self.files))

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class VerifyResult:
    """score in [0, 1]. status == "infra_error" means: no judgement was possible."""

    score: float
    passed: bool
    details: Mapping[str, Any] = field(default_factory=dict)
    status: VerifyStatus = "ok"
    reason: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"VerifyResult.score must be in [0, 1], got {self.score}")
        object.__setattr__(self, "details", freeze(self.details))

    @classmethod
    def infra(cls, reason: str, **details: Any) -> "VerifyResult":
        return cls(0.0, False, details, status="infra_error", reason=reason)

    @classmethod
    def fail(cls, reason: str, **details: Any) -> "VerifyResult":
        return cls(0.0, False, details, reason=reason)


@dataclass(frozen=True)
class TrajError:
    boundary: Boundary
    message: str


@dataclass(frozen=True)
class Turn:
    """One model turn, or one tool observation, in a trajectory."""

    role: Role
    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    trainable: bool = True  # False for observations: mask 0 in the loss
    tool_call: ToolCall | None = None
    exec_result: ExecResult | None = None
    wall_s: float = 0.0
    token_versions: tuple[int, ...] = ()  # weights version per token (Completion.token_versions); () = unknown


@dataclass(frozen=True)
class Trajectory:
    """Everything needed to replay and re-verify one sample."""

    task_id: str
    task_version: str
    domain: str
    prompt_ids: tuple[int, ...]
    turns: tuple[Turn, ...]
    weights_version: int = 0  # the oldest weights any of its tokens was sampled under (rl.partial_rollouts: several)
    reward: float = 0.0
    verify: VerifyResult | None = None
    step: int = 0
    group: int = 0
    sample: int = 0
    finish_reason: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)
    error: TrajError | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timings", freeze(self.timings))

    @property
    def completion_text(self) -> str:
        return "".join(t.text for t in self.turns if t.role == "assistant")

    @property
    def num_steps(self) -> int:
        return sum(1 for t in self.turns if t.role == "assistant")

    @property
    def infra_error(self) -> bool:
        return self.verify is not None and self.verify.status == "infra_error"
