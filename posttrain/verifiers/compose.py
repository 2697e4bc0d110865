"""Verifier composition: weighted sums, gates and a step-efficiency term.

Each combinator is itself a registered verifier whose arguments name inner verifiers by
Spec (`{"name": ..., "args": {...}}`), so a composed reward is one serialisable Spec:

    Spec("gate", {"gate": {"name": "json_schema", "args": {...}},
                  "then": {"name": "weighted", "args": {"parts": [
                      {"verifier": {"name": "field_match"}, "weight": 0.8},
                      {"verifier": {"name": "citations"}, "weight": 0.2}]}}})

Infra errors propagate: if any inner verifier could not judge, the composite could not
either (status `infra_error`), so a broken sandbox never becomes a score of 0.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from posttrain.errors import ConfigError
from posttrain.registry import build, verifier
from posttrain.types import Spec, Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext

_CACHE: dict[Spec, Any] = {}


def build_verifier(spec: Spec | Mapping[str, Any] | str) -> Any:
    """Build (and memoise by Spec) the verifier a task names."""
    if not isinstance(spec, Spec):
        from posttrain.tasks.io import FieldError, spec_from_obj

        try:
            spec = spec_from_obj(spec)
        except FieldError as e:
            raise ConfigError(f"bad verifier spec: {e.path}: {e.msg}") from None
    v = _CACHE.get(spec)
    if v is None:
        if len(_CACHE) >= 4096:  # per-task specs (expected answers in args) would grow it without bound
            _CACHE.clear()
        v = _CACHE[spec] = build(spec, kind="verifier")
    return v


async def verify(task: Task, trajectory: Trajectory, ctx: VerifyContext | None = None) -> VerifyResult:
    """Score `trajectory` with the verifier `task` names, directly (tests, scripts). The trainer and
    the evaluator go through `VerifierRunner` (run.py): format rule, timeout, retries, cache."""
    return await build_verifier(task.verifier)(task, trajectory, ctx or VerifyContext())


@verifier("weighted", answer_format="inner")
class Weighted:
    """score = sum(w_i * s_i) / sum(w_i); passes when every part passes."""

    def __init__(self, parts: Sequence[Mapping[str, Any]]) -> None:
        if not parts:
            raise ConfigError("weighted verifier needs at least one part")
        self.parts = []
        for i, p in enumerate(parts):
            w = float(p.get("weight", 1.0))
            if w < 0:
                raise ConfigError(f"weighted verifier: parts[{i}].weight must be >= 0, got {w}")
            self.parts.append((build_verifier(p["verifier"]), w))
        self.total = sum(w for _, w in self.parts)
        if self.total <= 0:
            raise ConfigError("weighted verifier: weights sum to 0")

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        results = [await v(task, trajectory, ctx) for v, _ in self.parts]
        for r in results:
            if r.status == "infra_error":
                return r
        score = sum(r.score * w for r, (_, w) in zip(results, self.parts)) / self.total
        details = {f"part{i}": {"score": r.score, "passed": r.passed, "reason": r.reason, **r.details} for i, r in enumerate(results)}
        return VerifyResult(min(1.0, max(0.0, score)), all(r.passed for r in results), details)


@verifier("gate", answer_format="inner")
class Gate:
    """`then` scores only if `gate` scores at least `threshold`; otherwise 0 with the gate's reason."""

    def __init__(self, gate: Any, then: Any, threshold: float = 1.0) -> None:
        self.gate, self.then, self.threshold = build_verifier(gate), build_verifier(then), float(threshold)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        g = await self.gate(task, trajectory, ctx)
        if g.status == "infra_error":
            return g
        if g.score < self.threshold:
            return VerifyResult(0.0, False, {"gate": dict(g.details)}, reason=f"gate failed: {g.reason or 'below threshold'}")
        r = await self.then(task, trajectory, ctx)
        return VerifyResult(r.score, r.passed, {"gate": dict(g.details), **r.details}, r.status, r.reason)


def step_factor(steps: int, reference: int, budget: int, floor: float) -> float:
    """1.0 up to `reference` steps, falling linearly to `floor` at `budget` steps and beyond."""
    if steps <= reference:
        return 1.0
    if budget <= reference:
        return floor
    frac = min(1.0, (steps - reference) / (budget - reference))
    return 1.0 - (1.0 - floor) * frac


@verifier("step_efficiency", answer_format="inner")
class StepEfficiency:
    """inner score times a step factor: no reward for steps alone (0 stays 0).

    `reference` is the oracle's step count (or the task's `metadata.reference_steps`);
    the budget is `task.limits.max_steps`. Counts assistant turns.
    """

    def __init__(self, inner: Any, reference: int | None = None, floor: float = 0.5) -> None:
        if not 0.0 <= floor <= 1.0:
            raise ConfigError(f"step_efficiency: floor must be in [0, 1], got {floor}")
        self.inner, self.reference, self.floor = build_verifier(inner), reference, float(floor)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        r = await self.inner(task, trajectory, ctx)
        if r.status == "infra_error":
            return r
        ref = self.reference if self.reference is not None else int(task.metadata.get("reference_steps", task.limits.max_steps))
        f = step_factor(trajectory.num_steps, ref, task.limits.max_steps, self.floor)
        details = {**r.details, "steps": trajectory.num_steps, "reference_steps": ref, "step_factor": f}
        return VerifyResult(r.score * f, r.passed, details, reason=r.reason)
