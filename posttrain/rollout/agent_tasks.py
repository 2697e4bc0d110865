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


# Warm-up habits. A base model facing "What is 4821 * 937?" does not always reach for the
# calculator: it often answers from its head with a rough estimate, more so when the
# numbers look small, and when it does call the tool it may call it again on the result
# to check it. A warm-up that adds these habits to a policy that already copies operands
# reliably gives RL failures that are *choices* (estimate instead of calling; a re-check,
# one step more than needed, whose copy the tiny model garbles) on which a group's samples
# disagree, rather than copying slips that every sample repeats. The estimate ("The answer
# is about 5000000.") is never the exact product, and its digits are not the ones the
# answer turn copies from the calculator's observation, so learning it leaves the copy
# skill in place (measured on seeds 0 and 1 of benchmarks/agent_bench.py: completion when
# calling is 0.92-0.93 at the habit checkpoint RL starts from). Estimates that wrote the
# exact product destroyed the copy skill.


def plan_variant(plan: list[dict], behaviour: str, answer: str = "") -> list[dict]:
    """The oracle `plan` as `behaviour` acts it: "guess" (the final answer `answer`, with no
    tool call) or "recheck" (the result checked by a second calculator call on it, `answer`
    being that result, before the final answer)."""
    if behaviour == "guess":
        return [{"answer": answer}]
    if behaviour == "recheck":
        calls, final = [s for s in plan if "tool" in s], [s for s in plan if "answer" in s]
        return calls + [{"tool": "calculator", "arguments": {"expression": answer}}] + final
    raise ValueError(f"unknown warm-up behaviour {behaviour!r}; expected guess or recheck")


def habit_tasks(tasks: Iterable[Task], guess_small: float, guess_large: float, recheck: float, seed: int
                ) -> list[Task]:
    """Copies of product `tasks` whose oracle plan is acted out with habits (seeded): an
    estimate without the tool with probability `guess_small` when the multiplier is below
    550 and `guess_large` otherwise; else the tool, its result re-checked (a second
    calculator call on the result) with probability `recheck`.
    For `plan_demonstrations`; prompt and verifier are unchanged."""
    from dataclasses import replace

    from posttrain.tasks.plan import parse_plan

    for name, p in (("guess_small", guess_small), ("guess_large", guess_large), ("recheck", recheck)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"habit probability {name} must be in [0, 1], got {p}")
    rng = random.Random(f"habits:{seed}")
    out = []
    for t in tasks:
        if t.metadata.get("kind") != "product":
            raise ValueError(f"habit_tasks: task {t.id} is not a calculator-product task")
        plan = parse_plan(t.oracle or "")
        b = int(str(plan[0]["arguments"]["expression"]).split("*")[1])
        if rng.random() < (guess_small if b < 550 else guess_large):
            p = int(t.metadata["answer"])
            plan = plan_variant(plan, "guess", f"The answer is about {round(p, 1 - len(str(p)))}.")
        elif rng.random() < recheck:
            plan = plan_variant(plan, "recheck", str(t.metadata["answer"]))
        out.append(replace(t, oracle=dump_plan(plan)))
    return out
