"""`rg_answer`: reasoning-gym's own checker (`score_answer`), wrapped so that only an honest answer passes.

    Spec("rg_answer", {"generator": "countdown", "level": 2.0, "args": {}, "seed": 123, "size": 50, "index": 7})

The item (question, reference answer, metadata) is regenerated from the spec (tasks/reasoning_gym.py),
so a task file stays small and the checker sees exactly the generator's object. reasoning-gym's
checkers are written for scoring, not for RL against a hostile policy: many give partial credit,
some search the answer for the reference (so a list of candidates contains it), some parse
loosely. The wrapper therefore:

1. takes the answer: the content of the ONE `<answer>...</answer>` block when the completion has
   tags (two blocks or an unclosed tag fail: several answers), else the whole completion; a task
   whose prompt asked for tags (`metadata["rg_tags"]`, the domain's `reasoning=True`) fails without them;
2. fails, before the checker sees it (`form_violation`), an answer longer than 1.5 times the
   reference plus 10 characters (a candidate list is long; an alternative correct answer is about
   the reference's length), one that holds the reference and more (normalised: "38 39", the
   reference twice), one with a list separator (" or ", ";", a newline, "|") the reference lacks,
   one with `**` or `^` the reference lacks (an exponent tower would hang a checker that evaluates
   it), and one not of its generator's `ANSWER_FORM` (rubiks_cube: move letters only; the package
   expands "U999999999" into a billion moves), and one that breaks its generator's `ITEM_RULES` rule
   on the item (puzzle24: the expression must use exactly the task's four numbers);
   for a generator in `EXACT` (its checker is broken) the answer must equal the reference, normalised;
3. runs `score_answer` in a worker thread with a time limit (a crash or overrun is a fail: the
   answer did it) and passes only a full score of 1.0: the reward is binary, partial credit is
   recorded in `details` only.

`posttrain tasks check rg-*` with the hack probes measures what is left; generators a probe still
games are excluded in `tasks/reasoning_gym.EXCLUDED` (docs/tasks.md says which and why).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from posttrain.registry import verifier
from posttrain.tasks import reasoning_gym as rg
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.math_answer import final_text

_OPEN, _CLOSE = "<answer>", "</answer>"
FULL = 1.0 - 1e-9


def extract(text: str, tags_required: bool) -> tuple[str | None, str]:
    """(the answer, "") or (None, why it has none)."""
    n_open, n_close = text.count(_OPEN), text.count(_CLOSE)
    if n_open == 0 and n_close == 0:
        return (None, "no <answer></answer> tags") if tags_required else (text.strip(), "")
    if n_open != 1 or n_close != 1:
        return None, f"{n_open} <answer> and {n_close} </answer> tags: exactly one answer block is allowed"
    m = re.search(r"<answer>(.*?)</answer>", text, re.S)
    return (m.group(1).strip(), "") if m else (None, "</answer> before <answer>")


def norm(s: str) -> str:
    return " ".join(s.split()).casefold()


SEPARATORS = (" or ", ";", "\n", "|")


def form_violation(generator: str, answer: str, ref: str) -> str:
    """Why `answer` cannot be one honest answer whatever the checker says ("" if it may be)."""
    if len(answer) > 1.5 * len(ref) + 10:
        return f"answer of {len(answer)} characters; the reference has {len(ref)}"
    a, r = norm(answer), norm(ref)
    if r and r in a and len(a) > len(r) + min(3, len(r) // 2):  # room for "38." or "(x)", not for "38 48"
        return "the answer holds the reference answer and more: several candidates"
    for sep in SEPARATORS:
        if sep in answer and sep not in ref:
            return f"answer contains {sep!r}, which the reference does not: several candidates"
    for op in ("**", "^"):
        if op in answer and op not in ref:
            return f"answer uses {op!r}, which the reference answer does not"
    form = rg.ANSWER_FORM.get(generator)
    if form is not None and not re.fullmatch(form, answer):
        return f"answer is not of the form {form}"
    return ""


def _score(key: tuple, item: dict, answer: str) -> float:
    """The item's own generator scores it (a few checkers read their config: tolerances, formats)."""
    return float(rg.dataset(*key[:5]).score_answer(answer, item))


@verifier("rg_answer", answer_format="line")  # each task names its own rule (metadata answer_format)
class RGAnswer:
    def __init__(self, generator: str, level: float, args: dict[str, Any], seed: int, size: int, index: int,
                 time_limit_s: float = 20.0) -> None:
        import json

        rg.require()
        self.key = (generator, float(level), json.dumps(dict(args), sort_keys=True), int(seed), int(size), int(index))
        self.generator, self.time_limit_s = generator, time_limit_s

    def _judge(self, text: str, tags_required: bool) -> VerifyResult:
        item = rg.item(*self.key)
        ref = rg.reference_answer(self.generator, item) or ""
        answer, why = extract(text, tags_required)
        if answer is None:
            return VerifyResult.fail(why)
        if not answer:
            return VerifyResult.fail("empty answer")
        rule = rg.ITEM_RULES.get(self.generator)
        why = form_violation(self.generator, answer, ref) or (rule(answer, item) if rule else "")
        if why:
            return VerifyResult.fail(why, got=answer[:80])
        if self.generator in rg.EXACT:  # the package's checker is broken for this generator: exact match instead
            ok = norm(answer) == norm(ref)
            return VerifyResult(1.0 if ok else 0.0, ok, {"got": answer[:80], "exact": True})
        try:
            score = _score(self.key, item, answer)
        except Exception as e:  # noqa: BLE001  the checker choked on this answer: the answer's fault
            return VerifyResult.fail(f"checker rejected the answer: {type(e).__name__}: {str(e)[:80]}")
        ok = score >= FULL
        return VerifyResult(1.0 if ok else 0.0, ok, {"rg_score": round(score, 4), "got": answer[:80]})

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        tags_required = task.metadata.get("rg_tags") is True  # the prompt asked for <answer> tags (reasoning=True)
        try:
            return await asyncio.wait_for(asyncio.to_thread(self._judge, final_text(trajectory), tags_required),
                                          self.time_limit_s)
        except asyncio.TimeoutError:
            return VerifyResult.fail(f"checker ran over {self.time_limit_s:g} s on this answer")
