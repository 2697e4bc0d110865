"""`tools`: multi-tool coordination over a calculator, a lookup table and a unit converter.

Each task ships its lookup tables (`environment.files["lookup.json"]`) and asks a
question that needs all three tools: look the rates up, convert the given quantities to
the table's unit, compute. Difficulty (0..3) sets the number of chained items
(1 + round(difficulty)). The oracle plan calls lookup and convert per item, then one
calculator expression, then answers. The verifier is
`step_efficiency(weighted(0.7 * math_answer, 0.3 * tool_use))`: a right answer without
the tools earns 0.7, extra steps beyond the oracle's cost up to half the score.
"""

from __future__ import annotations

import json
import random

from posttrain.registry import domain
from posttrain.tasks.plan import dump_plan, parse_plan
from posttrain.tasks.tools_impl import convert_value
from posttrain.types import Environment, Limits, Message, Spec, Task

ITEMS = ["apples", "rice", "coffee", "cheese", "almonds", "flour", "salmon", "tea", "lentils", "honey"]
CITIES = ["Avalon", "Brindle", "Corvo", "Dunmore", "Elstead", "Farrow", "Glenhollow", "Harwick"]
MASS_UNITS = ["lb", "oz", "g", "kg"]
TOOLS = ("calculator", "lookup", "convert")


def _purchase(rng: random.Random, k: int) -> tuple[str, dict, list, str, float]:
    prices = {it: round(rng.uniform(1, 40), 2) for it in rng.sample(ITEMS, 6)}
    chosen = rng.sample(sorted(prices), k)
    qty = [(it, round(rng.uniform(0.5, 12), 1), rng.choice(MASS_UNITS)) for it in chosen]
    qty = [(it, round(q * 100) if u == "g" else q, u) for it, q, u in qty]  # grams come in hundreds
    desc = ", ".join(f"{q:g} {u} of {it}" for it, q, u in qty)
    steps, terms, total = [], [], 0.0
    for it, q, u in qty:
        steps.append({"tool": "lookup", "arguments": {"table": "price_per_kg", "key": it}})
        steps.append({"tool": "convert", "arguments": {"value": q, "from_unit": u, "to_unit": "kg"}})
        kg = round(convert_value(q, u, "kg"), 10)
        terms.append(f"{prices[it]}*{kg!r}")
        total += prices[it] * kg
    steps.append({"tool": "calculator", "arguments": {"expression": " + ".join(terms)}})
    q = f"You buy {desc}. Prices are per kilogram in table 'price_per_kg'. What is the total cost in dollars, to the cent?"
    return q, {"price_per_kg": prices}, steps, f"{total:.2f}", total


def _travel(rng: random.Random, k: int) -> tuple[str, dict, list, str, float]:
    route = rng.sample(CITIES, k + 1)
    legs = {f"{a}-{b}": rng.randrange(20, 400) for a, b in zip(route, route[1:])}
    for _ in range(3):  # distractor legs
        a, b = rng.sample(CITIES, 2)
        legs.setdefault(f"{a}-{b}", rng.randrange(20, 400))
    speed = rng.choice([60, 75, 80, 90, 100, 120])
    steps, kms = [], []
    for a, b in zip(route, route[1:]):
        steps.append({"tool": "lookup", "arguments": {"table": "miles", "key": f"{a}-{b}"}})
        steps.append({"tool": "convert", "arguments": {"value": legs[f"{a}-{b}"], "from_unit": "mi", "to_unit": "km"}})
        kms.append(round(convert_value(legs[f"{a}-{b}"], "mi", "km"), 10))
    steps.append({"tool": "calculator", "arguments": {"expression": f"({' + '.join(map(repr, kms))}) / {speed}"}})
    hours = sum(kms) / speed
    q = (f"A car drives {' -> '.join(route)} at {speed} km/h. Leg distances in miles are in table 'miles' "
         f"(keys like 'A-B'). How many hours does the trip take, to two decimals?")
    return q, {"miles": legs}, steps, f"{hours:.2f}", hours


@domain("tools")
class ToolsDomain:
    name = "tools"

    def __init__(self, max_new_tokens: int = 256) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"tools:{seed}:{difficulty}")
        k = 1 + max(0, min(3, round(difficulty)))
        tasks = []
        for i in range(n):
            make = rng.choice([_purchase, _travel])
            question, tables, steps, answer, _ = make(rng, k)
            steps.append({"answer": f"The answer is {answer}."})
            ref = len(steps)
            verifier = Spec("step_efficiency", {"floor": 0.5, "inner": {"name": "weighted", "args": {"parts": [
                {"verifier": {"name": "math_answer", "args": {"answer": answer, "rel_tol": 0.0, "abs_tol": 0.011}}, "weight": 0.7},
                {"verifier": {"name": "tool_use", "args": {"required": list(TOOLS)}}, "weight": 0.3}]}}})
            tasks.append(Task(
                id=f"tools-{seed}-{i}", domain=self.name,
                prompt=(Message("system", "Use the tools: " + ", ".join(TOOLS) + ". End with 'The answer is X.'"), Message("user", question)),
                verifier=verifier, difficulty=float(k - 1),
                environment=Environment(files={"lookup.json": json.dumps(tables, sort_keys=True)}, tools=TOOLS),
                limits=Limits(max_steps=ref + 4, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
                metadata={"kind": make.__name__.lstrip("_"), "answer": answer, "reference_steps": ref},
                oracle=dump_plan(steps),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        steps = parse_plan(task.oracle or "")
        ans = float(task.metadata["answer"])
        bad = rng.choice([ans * 1.1 + 1, ans * 2 + 0.5, ans + 10])  # all > ans + 0.5 for ans >= 0
        if rng.random() < 0.5:  # skip the unit conversions and answer with unconverted numbers
            steps = [s for s in steps if s.get("tool") != "convert"]
        return dump_plan(steps[:-1] + [{"answer": f"The answer is {bad:.2f}."}])
