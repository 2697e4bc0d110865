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

import json
import random
from typing import Iterable

from posttrain.tasks.plan import dump_plan
from posttrain.types import Environment, Limits, Message, Spec, Task

SYSTEM = "Tools: calculator. End with 'The answer is X.'"
SYSTEM_TABLE = "Tools: calculator, lookup (table task). End with 'The answer is X.'"
REREAD = {"tool": "lookup", "arguments": {"table": "task", "key": "question"}}  # returns the question


def product_task(a: int, b: int, tid: str, max_steps: int = 4, max_new_tokens: int = 96, task_table: bool = False
                 ) -> Task:
    """`task_table`: the task also offers `lookup`, with a table `task` whose key `question`
    holds the question (so an agent can re-read it: REREAD)."""
    p = a * b
    q = f"What is {a} * {b}?"
    env = (Environment(files={"lookup.json": json.dumps({"task": {"question": q}})}, tools=("calculator", "lookup"))
           if task_table else Environment(tools=("calculator",)))
    verifier = Spec("step_efficiency", {"floor": 0.5, "inner": {"name": "weighted", "args": {"parts": [
        {"verifier": {"name": "math_answer", "args": {"answer": str(p), "rel_tol": 0.0, "abs_tol": 0.5}}, "weight": 0.7},
        {"verifier": {"name": "tool_use", "args": {"required": ["calculator"]}}, "weight": 0.3}]}}})
    plan = [{"tool": "calculator", "arguments": {"expression": f"{a}*{b}"}}, {"answer": f"The answer is {p}."}]
    return Task(id=tid, domain="tools", prompt=(Message("system", SYSTEM_TABLE if task_table else SYSTEM),
                                                Message("user", q)),
                verifier=verifier, difficulty=1.0, environment=env,
                limits=Limits(max_steps=max_steps, max_new_tokens=max_new_tokens, timeout_s=60.0),
                metadata={"kind": "product", "answer": str(p), "reference_steps": len(plan)}, oracle=dump_plan(plan))


def product_tasks(n: int, seed: int, exclude: Iterable[str] = (), task_table: bool = False) -> list[Task]:
    """`n` distinct seeded tasks; `exclude` holds task questions to skip (a held-out split);
    `task_table` as in `product_task`."""
    rng = random.Random(f"products:{seed}")
    seen = set(exclude)
    out: list[Task] = []
    while len(out) < n:
        a, b = rng.randrange(1000, 10_000), rng.randrange(100, 1_000)
        q = f"What is {a} * {b}?"
        if q in seen or len(str(a * b)) != 7:
            continue
        seen.add(q)
        out.append(product_task(a, b, f"tools-products-{seed}-{len(out)}", task_table=task_table))
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
#
# A third habit re-reads the question (REREAD: lookup on the task table) before calling the
# calculator, as an agent re-reads its task file before acting. It is harmless but costs a
# step, so a policy with it solves tasks in 3 steps where 2 suffice: the habit the
# step-efficiency reward has to remove. The observation is the question itself, in the same
# framing as the user turn (`<|tool|>` and `<|user|>` are one token each), so the call after
# it copies the operands at the same relative offset as the call after the prompt: the
# re-read path is as easy for the tiny model as the direct one. A fixed probe call instead
# ("2*2" first) shifts that offset, and whether the model learns both paths then depends on
# the run (three runs on seed 0: both; only the direct one; only the probed one).


def plan_variant(plan: list[dict], behaviour: str, answer: str = "") -> list[dict]:
    """The oracle `plan` as `behaviour` acts it: "guess" (the final answer `answer`, with no
    tool call), "recheck" (the result checked by a second calculator call on it, `answer`
    being that result, before the final answer) or "reread" (REREAD first; the task needs
    `task_table`)."""
    if behaviour == "reread":
        return [REREAD] + plan
    if behaviour == "guess":
        return [{"answer": answer}]
    if behaviour == "recheck":
        calls, final = [s for s in plan if "tool" in s], [s for s in plan if "answer" in s]
        return calls + [{"tool": "calculator", "arguments": {"expression": answer}}] + final
    raise ValueError(f"unknown warm-up behaviour {behaviour!r}; expected guess, recheck or reread")


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
        b = int(str(next(s for s in plan if s.get("tool") == "calculator")["arguments"]["expression"]).split("*")[1])
        if rng.random() < (guess_small if b < 550 else guess_large):
            p = int(t.metadata["answer"])
            plan = plan_variant(plan, "guess", f"The answer is about {round(p, 1 - len(str(p)))}.")
        elif rng.random() < recheck:
            plan = plan_variant(plan, "recheck", str(t.metadata["answer"]))
        out.append(replace(t, oracle=dump_plan(plan)))
    return out


def reread_tasks(tasks: Iterable[Task], reread: float, seed: int) -> list[Task]:
    """Copies of `tasks` (made with `task_table`) whose plans, when they call a tool, start
    with REREAD with probability `reread` (seeded); plans that answer without a tool are left
    as they are. For `plan_demonstrations`; prompt and verifier are unchanged."""
    from dataclasses import replace

    from posttrain.tasks.plan import parse_plan

    if not 0.0 <= reread <= 1.0:
        raise ValueError(f"reread probability must be in [0, 1], got {reread}")
    rng = random.Random(f"reread:{seed}")
    out = []
    for t in tasks:
        if reread and "lookup" not in t.environment.tools:
            raise ValueError(f"reread_tasks: task {t.id} offers no lookup tool (make it with task_table=True)")
        plan = parse_plan(t.oracle or "")
        if any("tool" in s for s in plan) and rng.random() < reread:
            plan = plan_variant(plan, "reread")
        out.append(replace(t, oracle=dump_plan(plan)))
    return out


def rereads(trajectory: object) -> bool:
    """Whether an agent trajectory's first tool call is REREAD."""
    calls = [x.tool_call for x in getattr(trajectory, "turns", ()) if x.tool_call is not None]
    return bool(calls) and calls[0].name == REREAD["tool"] and dict(calls[0].arguments) == REREAD["arguments"]
