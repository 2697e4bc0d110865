"""Calculator-product tasks of the `tools` domain, sized for the tiny model's context.

    tasks = product_tasks(2000, seed=0)            # "What is 4821 * 937?"

The full `tools` domain (posttrain/tasks/tools.py) chains lookup, convert and calculator
calls over a 200-character question: more than the default tiny model's 256-token
character context holds. These tasks keep the same contract (tools listed in the
environment, an oracle action plan, the domain's verifier shape
`step_efficiency(weighted(0.7 * math_answer, 0.3 * tool_use))`) with one tool: the
product of a 4-digit and a 3-digit number with a 7-digit result, which a character-level
model cannot compute in its head but can copy into a calculator call and copy back. The
widths are fixed so that copying is a constant relative offset (learnable by a 2-layer
model in minutes); the values are drawn at random.
The oracle: calculator(expression) -> "The answer is P." (2 steps); budget 4 steps.
"""

from __future__ import annotations

import random
from typing import Iterable

from posttrain.tasks.plan import dump_plan
from posttrain.types import Environment, Limits, Message, Spec, Task

SYSTEM = "Tools: calculator. End with 'The answer is X.'"


def product_task(a: int, b: int, tid: str, max_steps: int = 4, max_new_tokens: int = 96) -> Task:
    p = a * b
    verifier = Spec("step_efficiency", {"floor": 0.5, "inner": {"name": "weighted", "args": {"parts": [
        {"verifier": {"name": "math_answer", "args": {"answer": str(p), "rel_tol": 0.0, "abs_tol": 0.5}}, "weight": 0.7},
        {"verifier": {"name": "tool_use", "args": {"required": ["calculator"]}}, "weight": 0.3}]}}})
    plan = [{"tool": "calculator", "arguments": {"expression": f"{a}*{b}"}}, {"answer": f"The answer is {p}."}]
    return Task(id=tid, domain="tools", prompt=(Message("system", SYSTEM), Message("user", f"What is {a} * {b}?")),
                verifier=verifier, difficulty=1.0, environment=Environment(tools=("calculator",)),
                limits=Limits(max_steps=max_steps, max_new_tokens=max_new_tokens, timeout_s=60.0),
                metadata={"kind": "product", "answer": str(p), "reference_steps": len(plan)}, oracle=dump_plan(plan))


def product_tasks(n: int, seed: int, exclude: Iterable[str] = ()) -> list[Task]:
    """`n` distinct seeded tasks; `exclude` holds task questions to skip (a held-out split)."""
    rng = random.Random(f"products:{seed}")
    seen = set(exclude)
    out: list[Task] = []
    while len(out) < n:
        a, b = rng.randrange(1000, 10_000), rng.randrange(100, 1_000)
        q = f"What is {a} * {b}?"
        if q in seen or len(str(a * b)) != 7:
            continue
        seen.add(q)
        out.append(product_task(a, b, f"tools-products-{seed}-{len(out)}"))
    return out
