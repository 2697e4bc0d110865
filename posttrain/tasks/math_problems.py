"""`math`: short word and equation problems with one numeric answer.

Difficulty knob (0..3): 0 -> one-step integer problems (percent of, a mean, a rate);
1 -> linear equations and fraction sums; 2 -> two-step word problems (discount then
tax, mixtures); 3 -> compound growth and systems of two linear equations. Fractional
values mix the neighbouring levels. Answers are exact rationals: the verifier
(`math_answer`) accepts `7/12`, `\\frac{7}{12}` or `0.58333` (relative tolerance 1e-4).
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Callable

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task
from posttrain.tasks.numbers import close

Problem = tuple[str, Fraction]


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _percent_of(r: random.Random) -> Problem:
    p, n = r.choice([5, 10, 12, 15, 20, 25, 30, 40, 45, 60, 75]), r.randrange(20, 2000, 4)
    return f"What is {p}% of {n}?", Fraction(p * n, 100)


def _mean(r: random.Random) -> Problem:
    xs = [r.randrange(1, 100) for _ in range(r.randrange(3, 7))]
    return f"What is the mean of {', '.join(map(str, xs))}?", Fraction(sum(xs), len(xs))


def _rate(r: random.Random) -> Problem:
    speed, hours = r.randrange(20, 120), r.choice([Fraction(1, 2), Fraction(3, 2), 2, 3, Fraction(5, 2)])
    return f"A train travels at {speed} km/h for {_fmt(Fraction(hours))} hours. How many kilometres does it travel?", speed * Fraction(hours)


def _linear(r: random.Random) -> Problem:
    a, x, b = r.choice([2, 3, 4, 5, 6, 7, 8, 9, -3, -4]), Fraction(r.randrange(-30, 30), r.choice([1, 1, 2, 3])), r.randrange(-50, 50)
    c = a * x + b
    return f"Solve for x: {a}x {'+' if b >= 0 else '-'} {abs(b)} = {_fmt(c)}", x


def _fraction_sum(r: random.Random) -> Problem:
    a, b = Fraction(r.randrange(1, 12), r.randrange(2, 13)), Fraction(r.randrange(1, 12), r.randrange(2, 13))
    op = r.choice("+-")
    return f"Compute {_fmt(a)} {op} {_fmt(b)} as a fraction in lowest terms.", a + b if op == "+" else a - b


def _discount_tax(r: random.Random) -> Problem:
    price, off, tax = r.randrange(20, 500), r.choice([10, 15, 20, 25, 30]), r.choice([5, 8, 10, 20])
    q = f"A jacket costs ${price}. It is discounted by {off}%, then a {tax}% sales tax is added. What is the final price in dollars?"
    return q, Fraction(price) * (100 - off) / 100 * (100 + tax) / 100


def _mixture(r: random.Random) -> Problem:
    v1, c1, v2, c2 = r.randrange(1, 20), r.choice([10, 20, 30, 40]), r.randrange(1, 20), r.choice([50, 60, 70, 80])
    q = f"Mix {v1} litres of a {c1}% salt solution with {v2} litres of a {c2}% salt solution. What percent salt is the mixture?"
    return q, Fraction(v1 * c1 + v2 * c2, v1 + v2)


def _compound(r: random.Random) -> Problem:
    p, rate, years = r.randrange(100, 5000, 100), r.choice([2, 4, 5, 10]), r.randrange(2, 5)
    q = f"${p} is invested at {rate}% interest compounded yearly. What is it worth after {years} years, in dollars?"
    return q, Fraction(p) * Fraction(100 + rate, 100) ** years


def _system(r: random.Random) -> Problem:
    while True:
        a, b, c, d = (r.randrange(-6, 7) for _ in range(4))
        if a * d - b * c != 0:
            break
    x, y = r.randrange(-9, 10), r.randrange(-9, 10)
    return f"Solve the system {a}x + {b}y = {a * x + b * y} and {c}x + {d}y = {c * x + d * y}. What is x + y?", Fraction(x + y)


LEVELS: list[list[Callable[[random.Random], Problem]]] = [
    [_percent_of, _mean, _rate],
    [_linear, _fraction_sum],
    [_discount_tax, _mixture],
    [_compound, _system],
]


def _quantity_word(q: str) -> str:
    return "percent" if "percent" in q else "number"


@domain("math")
class MathProblems:
    name = "math"

    def __init__(self, max_new_tokens: int = 256, rel_tol: float = 1e-4) -> None:
        self.max_new_tokens, self.rel_tol = max_new_tokens, rel_tol

    def _level(self, rng: random.Random, difficulty: float) -> int:
        d = max(0.0, min(difficulty, 3.0))
        lo = int(d)
        return min(3, lo + (1 if rng.random() < d - lo else 0))

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"math:{seed}:{difficulty}")
        tasks = []
        for i in range(n):
            level = self._level(rng, difficulty)
            make = rng.choice(LEVELS[level])
            question, answer = make(rng)
            prompt = f"{question}\nGive the final {_quantity_word(question)} as \\boxed{{...}}."
            tasks.append(Task(
                id=f"math-{seed}-{i}",
                domain=self.name,
                prompt=(Message("user", prompt),),
                verifier=Spec("math_answer", {"answer": _fmt(answer), "rel_tol": self.rel_tol, "percent_as_fraction": False}),
                difficulty=float(level),
                limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=30.0),
                metadata={"kind": make.__name__.lstrip("_"), "answer": _fmt(answer)},
                oracle=f"The answer is \\boxed{{{_fmt(answer)}}}.",
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        answer = Fraction(task.metadata["answer"])
        candidates = (answer + 1, answer - 1, answer * 2 + 1, -answer - 1, answer * Fraction(11, 10) + 1)
        wrong = rng.choice([w for w in candidates if not close(w, answer, 10 * self.rel_tol, 1e-6)])
        return f"The answer is \\boxed{{{_fmt(wrong)}}}."
