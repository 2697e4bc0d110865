"""`arithmetic`: integer sums and differences with an exact numeric answer.

Difficulty knob: 1.0 -> two 2-digit operands with `+`; 2.0 -> 3-digit operands with `+`
and `-`; fractional values interpolate the operand range. The prompt is the bare
expression (`47+38=`) so a character-level model can learn it; the oracle is the answer.
"""

from __future__ import annotations

import random

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task


@domain("arithmetic")
class Arithmetic:
    name = "arithmetic"

    def __init__(self, max_new_tokens: int = 8) -> None:
        self.max_new_tokens = max_new_tokens

    def _operands(self, rng: random.Random, difficulty: float) -> tuple[int, str, int]:
        hi = int(10 ** (1 + max(0.0, min(difficulty, 3.0))))  # 1.0 -> 100, 2.0 -> 1000
        lo = hi // 10
        a, b = rng.randrange(lo, hi), rng.randrange(lo, hi)
        op = "+" if difficulty < 1.5 or rng.random() < 0.5 else "-"
        return a, op, b

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"arithmetic:{seed}:{difficulty}")
        tasks = []
        for i in range(n):
            a, op, b = self._operands(rng, difficulty)
            answer = a + b if op == "+" else a - b
            tasks.append(Task(
                id=f"arithmetic-{seed}-{i}",
                domain=self.name,
                prompt=(Message("user", f"{a}{op}{b}="),),
                verifier=Spec("exact_numeric", {"answer": answer}),
                difficulty=difficulty,
                limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=10.0),
                metadata={"a": a, "b": b, "op": op},
                oracle=str(answer),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        answer = int(task.oracle)
        return str(answer + rng.choice([-10, -1, 1, 10]))
