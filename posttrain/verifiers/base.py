"""The Verifier contract: the same object scores RL rewards and evaluation items.

    result = await verifier(task, trajectory, ctx)

A verifier judges the trajectory's final answer (or final sandbox state). It returns
`VerifyResult(status="infra_error")` when it could not judge (sandbox down, checker
timed out): that sample is retried and kept out of the gradient, never scored 0.
Untrusted code runs only through `ctx.sandbox` / `ctx.session`.
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
    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult: ...
