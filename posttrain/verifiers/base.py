"""The Verifier contract: the same object scores RL rewards and evaluation items.

    result = await verifier(task, trajectory, ctx)

A verifier judges the trajectory's final answer (or final sandbox state). It returns
`VerifyResult(status="infra_error")` when it could not judge (sandbox down, checker
timed out): that sample is retried and kept out of the gradient, never scored 0.
Untrusted code runs only through `ctx.sandbox` / `ctx.session`.

A verifier that can score many answers to one task at once (one sandbox round for a
group) also implements `BatchVerifier.verify_batch` and says so by subclassing it; the
runner checks `isinstance(v, BatchVerifier)`, never probes for the method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from posttrain.sandbox.protocol import Sandbox, Session
from posttrain.types import Task, Trajectory, VerifyResult


@dataclass
class VerifyContext:
    sandbox: Sandbox | None = None
    session: Session | None = None  # the episode's live session, for final-state checks
    extra: dict[str, Any] | None = None


@runtime_checkable
class Verifier(Protocol):
    """Scores one trajectory against its task: a VerifyResult whose `infra_error` status means the
    check could not run (never a score of 0). Registered with `@verifier(name, answer_format=...)`."""

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult: ...


@runtime_checkable
class BatchVerifier(Verifier, Protocol):
    """A verifier that also scores a group's distinct answers to one task together."""

    async def verify_batch(self, task: Task, answers: list[str], ctx: VerifyContext) -> list[VerifyResult]:
        """One VerifyResult per answer, in order; raising leaves the answers to the one-by-one path."""
        ...
