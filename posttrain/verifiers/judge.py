"""`judge`: a second model scores an answer against a rubric, a reference, or a reference pairwise.

    Spec("judge", {"model": "judge", "mode": "reference"})             # reference = task.oracle
    Spec("judge", {"mode": "rubric", "rubric": "Names the capital of France.", "gate": {"name": "exact_numeric",
                   "args": {"answer": 4}}})

`model` names an entry of the run's `models:` (opened by `ServicePool`; models/service.py).
Modes: `rubric` (PASS/FAIL against the rubric), `reference` (PASS/FAIL given a correct
reference), `pairwise` (the answer against the reference, judged in both orders: position
bias cancels, a split verdict is a tie, 0.5). A program `gate` (any registered verifier)
runs first where one exists: the judge can only lower its verdict, never raise it.

What the judge sees is defused (judge_prompt.py): an answer that addresses the judge, claims
to be correct, carries verdict markup or repeats the rubric scores 0 without a model call;
the rest is quoted between nonce markers; the verdict is read only from the first line of
the judge's own reply. A judge that fails (the service errs, times out, or replies with
no verdict) gives `VerifyResult.infra`: kept out of the gradient, never a score.
Verdicts are cached by content hash (judge model, mode, rubric, reference, question, answer).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Sequence

from posttrain.models.service import ModelService, active_service
from posttrain.registry import build, verifier
from posttrain.types import Spec, Task, Trajectory, VerifyResult, content_hash
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.judge_prompt import (defuse, nonce_for, pairwise_prompt, parse_choice, parse_verdict,
                                              rubric_prompt)

MODES = ("rubric", "reference", "pairwise")
_CACHE: "OrderedDict[str, VerifyResult]" = OrderedDict()  # process-wide: a GRPO group and a re-evaluation repeat answers
CACHE_ENTRIES = 100_000  # least recently used verdicts go first: a long run must not grow without bound


def _remember(key: str, res: VerifyResult) -> None:
    _CACHE[key] = res
    _CACHE.move_to_end(key)
    while len(_CACHE) > CACHE_ENTRIES:
        _CACHE.popitem(last=False)


def clear_cache() -> None:
    _CACHE.clear()


def question_of(task: Task) -> str:
    return next((m.content for m in reversed(task.prompt) if m.role == "user"), "")


@verifier("judge", answer_format="text")  # free text, judged whole
class JudgeVerifier:
    def __init__(self, model: str = "judge", mode: str = "reference", rubric: str = "", reference: str | None = None,
                 gate: Mapping[str, Any] | None = None, max_new_tokens: int = 8) -> None:
        if mode not in MODES:
            raise ValueError(f"judge mode {mode!r}: expected one of {', '.join(MODES)}")
        if mode == "rubric" and not rubric:
            raise ValueError("judge mode 'rubric' needs a rubric")
        self.model, self.mode, self.rubric, self.reference = model, mode, rubric, reference
        self.gate = build(Spec(gate["name"], gate.get("args", {})), kind="verifier") if gate else None
        self.max_new_tokens = max_new_tokens

    def service(self) -> ModelService:
        return active_service(self.model)

    def _reference(self, task: Task) -> str | None:
        ref = self.reference if self.reference is not None else task.oracle
        if self.mode in ("reference", "pairwise") and ref is None:
            raise ValueError(f"judge mode {self.mode!r} on task {task.id}: no reference (args.reference or task.oracle)")
        return ref if self.mode != "rubric" else self.reference

    def _key(self, svc: ModelService, task: Task, answer: str) -> str:
        return content_hash([svc.model_id, self.mode, self.rubric, self._reference(task), question_of(task), answer])

    def _convs(self, task: Task, answer: str) -> list[list[dict[str, str]]]:
        """The conversations one verdict needs: one, or two (both orders) for pairwise."""
        q, ref, clean = question_of(task), self._reference(task), defuse(answer, self.rubric).text
        nonce = nonce_for(q, answer)
        if self.mode != "pairwise":
            return [rubric_prompt(q, clean, self.rubric, ref, nonce)]
        ref_clean = defuse(ref or "").text
        return [pairwise_prompt(q, clean, ref_clean, self.rubric, nonce),
                pairwise_prompt(q, ref_clean, clean, self.rubric, nonce)]

    def _score(self, replies: Sequence[Any]) -> VerifyResult:
        bad = [r for r in replies if not r.ok]
        if bad:
            return VerifyResult.infra(f"judge model failed: {bad[0].error}", judge="service_error")
        texts = [r.text for r in replies]
        if self.mode != "pairwise":
            v = parse_verdict(texts[0])
            if v is None:
                return VerifyResult.infra("judge reply holds no verdict", judge="unparseable", reply=texts[0][:200])
            return VerifyResult(float(v == "PASS"), v == "PASS", {"judge": v, "reply": texts[0][:200]})
        first, second = parse_choice(texts[0]), parse_choice(texts[1])
        if first is None or second is None:
            return VerifyResult.infra("judge reply holds no choice", judge="unparseable", replies=[t[:100] for t in texts])
        # the candidate is A in the first order and B in the second
        wins = (first == "A") + (second == "B")
        losses = (first == "B") + (second == "A")
        score = 1.0 if wins == 2 else 0.0 if losses == 2 else 0.5
        return VerifyResult(score, score == 1.0, {"judge": [first, second], "position_flip": first == second != "TIE"})

    async def _gated(self, task: Task, answers: Sequence[str], ctx: VerifyContext) -> list[VerifyResult | None]:
        """A verdict for each answer settled without the judge (a flag, the gate, the cache), else None."""
        out: list[VerifyResult | None] = []
        svc = self.service()
        for a in answers:
            flags = defuse(a, self.rubric).flags
            if flags:
                out.append(VerifyResult.fail(f"judge-directed text: {', '.join(flags)}", flags=list(flags)))
                continue
            if not a.strip():
                out.append(VerifyResult.fail("empty answer"))
                continue
            if self.gate is not None:
                g = await self.gate(task, _as_traj(task, a), ctx)
                if g.status != "ok" or not g.passed:
                    out.append(g if g.status != "ok" else VerifyResult.fail(f"program gate: {g.reason}", gate=False))
                    continue
            out.append(_CACHE.get(self._key(svc, task, a)))
        return out

    async def verify_batch(self, task: Task, answers: Sequence[str], ctx: VerifyContext) -> list[VerifyResult]:
        """Every answer's verdict; the ones that need the judge go to it as one batch."""
        settled = await self._gated(task, answers, ctx)
        todo = [i for i, r in enumerate(settled) if r is None]
        per = 2 if self.mode == "pairwise" else 1
        svc = self.service()
        convs = [c for i in todo for c in self._convs(task, answers[i])]
        replies = await svc.chat(convs, svc.params(max_new_tokens=self.max_new_tokens, temperature=0.0)) if convs else []
        for j, i in enumerate(todo):
            res = self._score(replies[j * per:(j + 1) * per])
            if res.status == "ok":
                _remember(self._key(svc, task, answers[i]), res)
            settled[i] = res
        return [r for r in settled if r is not None]

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        return (await self.verify_batch(task, [trajectory.completion_text], ctx))[0]


def _as_traj(task: Task, answer: str) -> Trajectory:
    from posttrain.types import Turn

    return Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", answer),))
