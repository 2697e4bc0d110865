"""`code`: write a Python expression in `x` that fits the given values of f.

The prompt shows `f(0)` and `f(1)` of a hidden linear function `f(x) = m*x + c`; the
model answers with a Python expression such as `x*3+4`. The verifier runs the task's
unit tests (f at several x) in the sandbox; the reward is the fraction that pass, so
getting the intercept right but not the slope earns partial credit.

Two forms (the domain argument `form`):
- `fit` (default): the prompt shows `f(0)` and `f(1)`; the slope is `f(1) - f(0)`.
- `shift`: the prompt shows `f(x)=x*m+c` and asks for `g(x)=f(x+1)`; the oracle answer is
  the simplified `x*m+(m+c)`, so the model copies the slope and adds it to the intercept.
  A 2-layer character model learns 2-digit addition from a few thousand examples but not
  subtraction, so `shift` is the form the quickstart's tiny model can improve on with RL.

Difficulty knob: d <= 1 -> slope 2..2+17d, intercept 0..99d (d=1: 1,800 distinct tasks); 2.0 -> slope -19..19 (not 0, 1),
intercept 0..99. Limits: the answer is evaluated as one expression, not a statement block
(it may span lines or sit in a ```python fence: the format rule is `CODE`). Each answer of
a GRPO group runs in its own sandbox execution (`verifiers/code_tests.py`).
"""

from __future__ import annotations

import random

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

TEST_XS = (0, 1, 2, 3, 5, 10)
FORMS = ("fit", "shift")


@domain("code")
class CodeDomain:
    name = "code"

    def __init__(self, max_new_tokens: int = 10, form: str = "fit") -> None:
        if form not in FORMS:
            raise ValueError(f"code domain: unknown form {form!r}; expected one of {sorted(FORMS)}")
        self.max_new_tokens = max_new_tokens
        self.form = form

    def _coeffs(self, rng: random.Random, difficulty: float) -> tuple[int, int]:
        if difficulty <= 1.0:  # slope 2..2+17d, intercept 0..99d: d=1 -> 1,800 distinct tasks
            d = max(difficulty, 0.1)
            return rng.randrange(2, 3 + round(17 * d)), rng.randrange(0, 1 + round(99 * d))
        m = rng.choice([v for v in range(-19, 20) if v not in (0, 1)])
        return m, rng.randrange(0, 100)

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"code:{seed}:{difficulty}")
        tasks = []
        for i in range(n):
            m, c = self._coeffs(rng, difficulty)
            if self.form == "shift":  # g(x) = f(x+1) = m*x + (m+c)
                prompt, c = f"f(x)=x*{m}+{c} g(x)=f(x+1)", m + c
            else:
                prompt = f"f(0)={c},f(1)={m + c}"
            tests = [[x, m * x + c] for x in TEST_XS]
            tasks.append(Task(
                id=f"code-{seed}-{i}",
                domain=self.name,
                prompt=(Message("user", prompt),),
                verifier=Spec("python_tests", {"tests": tests, "arg": "x"}),
                difficulty=difficulty,
                limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=10.0),
                metadata={"m": m, "c": c, "form": self.form},  # the answer is x*m+c
                oracle=f"x*{m}+{c}",
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        m, c = task.metadata["m"], task.metadata["c"]
        return rng.choice([f"x*{m + 1}+{c}", f"x*{m}+{c + 1}", f"{c}"])
