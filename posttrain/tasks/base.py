"""The Domain contract: a seeded task generator with a difficulty knob and an oracle.

    dom = build("arithmetic", kind="domain")
    tasks = dom.generate(n=200, seed=0, difficulty=1.0)   # deterministic for a seed
    assert all(t.oracle is not None for t in tasks)
    wrong = dom.wrong_answer(tasks[0], random.Random(0))  # plausible but wrong

A domain owns how its tasks are made; each task names its verifier by `Spec`, so the
trainer and the evaluator score it with the same object. Register a domain with
`@domain("name")` from `posttrain.registry`; a user can do so from a file outside the
package (see docs/tasks.md).
"""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

from posttrain.types import Task


@runtime_checkable
class Domain(Protocol):
    """A seeded task generator: `generate` is deterministic for a seed; `wrong_answer` is plausible but wrong."""

    name: str

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]: ...

    def wrong_answer(self, task: Task, rng: random.Random) -> str: ...


class DomainCheck(Protocol):
    """A domain's own load-time check (registry kind `domain_check`, keyed by the domain's name): its
    package is installed, `args` and the difficulty levels are valid; a one-line ConfigError naming
    `key` otherwise. Runs in config_check before any task is generated."""

    def __call__(self, name: str, args: Any, levels: Any, key: str) -> None: ...


class DomainFamily(Protocol):
    """A family of domains sharing a name prefix (registry kind `domain_family`, keyed by the prefix,
    e.g. `rg-`): the one-line error for an unknown member's name, or None when it is not the family's."""

    def __call__(self, name: str) -> str | None: ...


def question_key(t: Task) -> str:
    """What makes a task a different question, for keeping splits apart: its last prompt message, and
    where a simulated user drives the episode, the user's scenario too (a τ² prompt is the domain's
    policy alone, the same for every task of the domain)."""
    scenario = t.metadata.get("user_scenario")
    return t.prompt[-1].content if scenario is None else f"{t.prompt[-1].content}\n{scenario}"


def generate_split(domain: Domain, n: int, seed: int, difficulty: float, exclude: set[str] = frozenset()) -> list[Task]:
    """`n` tasks whose prompts are not in `exclude` (keeps held-out splits disjoint)."""
    out: list[Task] = []
    attempt = 0
    while len(out) < n and attempt < 20:
        for t in domain.generate(n * 2, seed + 7919 * attempt, difficulty):
            key = question_key(t)
            if key not in exclude:
                exclude = exclude | {key}
                out.append(t)
                if len(out) == n:
                    break
        attempt += 1
    return out
