"""Candidate-pair probes: the right answer listed beside a wrong one, for checkers that search.

    for text in pair_answers(task.oracle, dom.wrong_answer(task, rng)):   # each must score < 1
        ...

The generic hack probes (hack_probes.py) never see the expected answer, so they catch a checker
that accepts junk or a long candidate list, but not one that accepts a SHORT list holding the
answer ("Yes No", "12 13", the reference twice). A policy that learned to hedge between two
candidates would be paid by such a checker. These answers are built from the oracle and the
domain's own wrong answer, so they are for soundness checks of checkers we did not write
(reasoning-gym's `score_answer`), not probes a model could run. Tags are kept outside: for an
oracle of the form `<answer>X</answer>` the pair goes inside one block.
"""

from __future__ import annotations

import re

SEPARATORS = (" ", ", ", " or ", "\n", "; ")


def pair_answers(oracle: str, wrong: str) -> list[str]:
    """`oracle` and `wrong` listed together in several ways (both orders), and the oracle twice."""
    m, w = re.fullmatch(r"<answer>(.*)</answer>", oracle, re.S), re.fullmatch(r"<answer>(.*)</answer>", wrong, re.S)
    right, bad = (m.group(1) if m else oracle), (w.group(1) if w else wrong)
    out = []
    for sep in SEPARATORS:
        out += [right + sep + bad, bad + sep + right]
    out.append(right + " " + right)
    if m:
        out = [f"<answer>{x}</answer>" for x in out] + [f"<answer>{bad}</answer><answer>{right}</answer>"]
    return list(dict.fromkeys(x for x in out if x.strip() != right.strip()))
