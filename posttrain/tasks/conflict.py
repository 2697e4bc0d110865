"""`conflict`: documents that contradict each other; one is authoritative by a stated rule.

Each task states a rule, either `date` (the most recent document wins) or `rank` (the
highest-ranked source wins: registry > newspaper > blog > forum; ties go to the most
recent). Documents carry distinct dates, so exactly one wins. The answer names the value
and cites every document that states it (the supporting set). Difficulty (0..3) adds
documents (3 + 2*level) and competing values (2 + level//2). The verifier is
`weighted(0.5 * labelled_answer, 0.5 * citations)` (citation F1; precision and recall
in details).
"""

from __future__ import annotations

import datetime as dt
import random

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

RANKS = ["registry", "newspaper", "blog", "forum"]  # best first
SOURCES = {"registry": "National Statistics Registry", "newspaper": "The Daily Ledger", "blog": "Town Notes blog", "forum": "a community forum"}
TOPICS = [
    ("the population of {x}", ["Marrow Bay", "Eastwick", "Tollan", "Brightwater"], lambda r: str(r.randrange(2000, 90000))),
    ("the height in metres of {x}", ["the Corbel Tower", "Sunspire", "the Old Mill chimney"], lambda r: str(r.randrange(40, 400))),
    ("the chief executive of {x}", ["Heliotrope Inc", "Quarry & Sons", "Larkspur Energy"],
     lambda r: r.choice(["Dana Whitlock", "Omar Reyes", "Priya Natarajan", "Karl Jensen", "Yuki Sato", "Grace Obi"])),
    ("the opening year of {x}", ["the Harlow Bridge", "Pier 9", "the Glasshouse Museum"], lambda r: str(r.randrange(1890, 2020))),
]


def _winner(docs: list[dict], rule: str) -> dict:
    if rule == "date":
        return max(docs, key=lambda d: d["date"])
    return min(docs, key=lambda d: (RANKS.index(d["source"]), -d["date"].toordinal()))


@domain("conflict")
class Conflict:
    name = "conflict"

    def __init__(self, max_new_tokens: int = 96) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"conflict:{seed}:{difficulty}")
        level = max(0, min(3, round(difficulty)))
        tasks = []
        for i in range(n):
            template, subjects, make_value = rng.choice(TOPICS)
            subject = template.format(x=rng.choice(subjects))
            values: list[str] = []
            while len(values) < 2 + level // 2:
                v = make_value(rng)
                if v not in values:
                    values.append(v)
            days = rng.sample(range(0, 3650), 3 + 2 * level)
            docs = [{"id": f"d{j + 1}", "source": rng.choice(RANKS), "date": dt.date(2015, 1, 1) + dt.timedelta(days=day),
                     "value": values[j % len(values)] if j < len(values) else rng.choice(values)} for j, day in enumerate(days)]
            rng.shuffle(docs)
            for j, d in enumerate(docs):
                d["id"] = f"d{j + 1}"
            rule = rng.choice(["date", "rank"])
            win = _winner(docs, rule)
            supporting = [d["id"] for d in docs if d["value"] == win["value"]]
            rule_text = ("The most recent document is authoritative." if rule == "date" else
                         "The highest-ranked source is authoritative (registry > newspaper > blog > forum); "
                         "between equal sources, the most recent wins.")
            body = "\n".join(f"[{d['id']}] ({SOURCES[d['source']]}, {d['source']}, {d['date'].isoformat()}): "
                             f"Reports say {subject} is {d['value']}." for d in docs)
            q = (f"{body}\n\nRule: {rule_text}\nQuestion: what is {subject}? Reply with two lines:\n"
                 "ANSWER: <value>\nCITATIONS: <ids of every document stating that value, like [d1], [d3]>")
            tasks.append(Task(
                id=f"conflict-{seed}-{i}", domain=self.name, prompt=(Message("user", q),),
                verifier=Spec("weighted", {"parts": [
                    {"verifier": {"name": "labelled_answer", "args": {"expected": win["value"]}}, "weight": 0.5},
                    {"verifier": {"name": "citations", "args": {"supporting": supporting}}, "weight": 0.5}]}),
                difficulty=float(level), limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=30.0),
                metadata={"rule": rule, "authoritative": win["id"], "answer": win["value"], "supporting": supporting,
                          "values": {d["id"]: d["value"] for d in docs}},
                oracle=f"ANSWER: {win['value']}\nCITATIONS: " + ", ".join(f"[{s}]" for s in supporting),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        values = dict(task.metadata["values"])
        right = task.metadata["answer"]
        stale = sorted({v for v in values.values() if v != right})
        if rng.random() < 0.7:  # a contradicted value with its own documents cited
            v = rng.choice(stale)
            ids = [k for k, x in values.items() if x == v]
            return f"ANSWER: {v}\nCITATIONS: " + ", ".join(f"[{k}]" for k in ids)
        extra = rng.choice([k for k, x in values.items() if x != right])
        return f"ANSWER: {right}\nCITATIONS: [{task.metadata['authoritative']}], [{extra}]"  # over-cites
