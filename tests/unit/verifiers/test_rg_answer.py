"""`rg_answer` (verifiers/rg_answer.py): reasoning-gym's checkers behind guards a hedging policy cannot pass.
Every answer goes through the RL scoring path (`VerifierRunner`, format rule first)."""

from __future__ import annotations

import asyncio

import pytest

from posttrain.registry import build
from posttrain.verifiers.rg_answer import extract, form_violation

pytest.importorskip("reasoning_gym")


def _score(task, text: str) -> float:
    from posttrain.verifiers.soundness.check import score_once

    return asyncio.run(score_once(task, text, None)).score


def _task(name: str, **args):
    return build(name, kind="domain", **args).generate(1, 3, 1.0)[0]


def test_exactly_one_answer_block_is_read():
    assert extract("work <answer>42</answer>", False) == ("42", "")
    assert extract("<answer>41</answer><answer>42</answer>", False)[0] is None
    assert extract("42", True)[0] is None  # the prompt asked for tags


@pytest.mark.parametrize("answer, why", [
    ("38 48", "holds the reference answer and more"),
    ("48 38", "holds the reference answer and more"),
    ("38 or 40", "several candidates"),
    ("1 2 3 4 5 6 7 8 9 10", "characters; the reference has 2"),
    ("9**99", "'**'"),
])
def test_hedged_or_dangerous_answers_never_reach_the_checker(answer, why):
    assert why in form_violation("gsm_symbolic", answer, "38")


def test_the_oracle_passes_and_a_hedge_fails_on_a_lenient_checker():
    task = _task("rg-gsm_symbolic")
    assert _score(task, task.oracle) == 1.0
    assert _score(task, f"{task.oracle} {int(task.oracle) + 10}") == 0.0


def test_a_broken_checker_is_replaced_by_an_exact_comparison():
    task = _task("rg-game_of_life_halting")  # its score_answer passes any non-empty text
    other = "True" if task.oracle == "False" else "False"
    assert _score(task, task.oracle) == 1.0 and _score(task, other) == 0.0 and _score(task, "False True") == 0.0


def test_a_figlet_word_passes_only_when_every_letter_is_right():
    # reasoning-gym pays 0.1 a letter in place, capped at 1.0: ten letters of a long word in place scored 1
    tasks = build("rg-figlet_font", kind="domain").generate(20, 0, 4.0)
    task = next(t for t in tasks if len(t.oracle) >= 12)
    word = task.oracle
    near = word[:-2] + ("QQ" if word[-2:] != "QQ" else "ZZ")  # the last two letters wrong
    assert _score(task, word) == 1.0 and _score(task, word.lower()) == 1.0
    assert _score(task, near) == 0.0 and _score(task, f"{word}, 0") == 0.0


def test_a_move_count_bomb_is_refused_before_the_cube_is_turned():
    from posttrain.verifiers.soundness.check import score_once

    r = asyncio.run(score_once(_task("rg-rubiks_cube"), "U9999999999", None))  # the package would expand 10^10 moves
    assert r.score == 0.0 and "not of the form" in r.reason


def test_partial_credit_is_not_paid():
    task = _task("rg-mini_sudoku")
    rows = task.oracle.splitlines()
    first = rows[0].split()
    first[0], first[1] = first[1], first[0]  # two cells swapped: reasoning-gym pays part of it
    assert _score(task, "\n".join([" ".join(first), *rows[1:]])) == 0.0


def test_a_puzzle24_expression_passes_only_on_the_numbers_it_was_given():
    """puzzle24's score_answer never reads the task's numbers: one expression making 24 passed every task
    (benchmarks/constant_answers.py). Each task's oracle, tried on the others, passes only where the numbers
    are the same four."""
    import re

    tasks = build("rg-puzzle24", kind="domain").generate(12, 1, 1.0)
    given = {t.id: re.search(r"Make 24 using ([\d, ]+)\.", t.prompt[0].content).group(1) for t in tasks}
    numbers = {i: sorted(g.split(", ")) for i, g in given.items()}
    for t in tasks:
        for other in tasks:
            expected = 1.0 if sorted(re.findall(r"\d+", other.oracle)) == numbers[t.id] else 0.0
            assert _score(t, other.oracle) == expected, (t.id, other.oracle, numbers[t.id])
    assert sum(_score(t, "2*(3*3 + 3)") for t in tasks) <= sum(numbers[t.id] == ["2", "3", "3", "3"] for t in tasks)


def test_a_puzzle24_answer_with_foreign_numbers_is_named_before_the_checker():
    import re

    from posttrain.verifiers.soundness.check import score_once

    task = build("rg-puzzle24", kind="domain").generate(1, 3, 1.0)[0]
    digits = lambda e: sorted(re.findall(r"\d+", e))  # noqa: E731
    foreign = next(e for e in ("1*2*3*4", "2*(3*3 + 3)", "4*(1 + 4 + 1)") if digits(e) != digits(task.oracle))
    r = asyncio.run(score_once(task, foreign, None))  # 24, from four numbers in range, not the task's
    assert r.score == 0.0 and "each to be used once" in r.reason
