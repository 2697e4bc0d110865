"""ModelReader: the summarise and answer steps driven by a generation engine.

    reader = ModelReader(engine, tokenizer, context_tokens=256)
    LongDoc(doc, reader, tokenizer, max_tokens=reader.chunk_budget()).ask(question)

Prompts go through the tokenizer's chat template (`rollout/prompting.py`); decoding is
greedy. The answer prompt labels each chunk `[c12 | path | start-end]` and asks for
`<answer> [c12]` or `not found`. When all merged chunks do not fit the model's context,
the reader reads them one at a time (map) and pools the claims (reduce), so a model with
a 256-token window still reads each candidate whole.

Grounding: the model names a chunk; the reader locates the answer text inside that
chunk (or, when the model cited nothing, inside any context chunk) and cites the
sentence that contains it, as document offsets. An answer found nowhere in the context
gets no citation, so verification removes it. `ModelSupport` is the NLI-style
supporter for `verify`: it asks the model whether the span supports the claim.

Limits: one claim per model call; the model's own offsets are not parsed (it cites
chunk ids, the reader computes offsets); no sampling, no self-consistency voting.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

from posttrain.longctx.chunk import Chunk
from posttrain.longctx.rank import render_context
from posttrain.longctx.reader import Citation, Claim, reader
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.types import Message

_CITE = re.compile(r"\[\s*(c\d+)\s*\]")
_SENT = re.compile(r"[^.!?\n]*[.!?]?")
SYSTEM = "Answer from the context as: value [chunk id]. Else: not found"


def _sentence_around(chunk: Chunk, pos: int, n: int) -> tuple[int, int]:
    """Document offsets of the sentence (or table row) of `chunk` holding text[pos:pos+n]."""
    for m in _SENT.finditer(chunk.text):
        if m.start() <= pos and pos + n <= max(m.end(), m.start() + 1):
            return chunk.start + m.start(), chunk.start + m.end()
    return chunk.start + pos, chunk.start + pos + n


def ground(answer: str, cited: Sequence[Chunk]) -> tuple[Citation, ...]:
    """Citations for `answer` inside the given chunks (case-insensitive exact text)."""
    out = []
    needle = answer.strip().lower()
    for c in cited:
        pos = c.text.lower().find(needle) if needle else -1
        if pos >= 0:
            s, e = _sentence_around(c, pos, len(needle))
            out.append(Citation(c.id, s, e))
    return tuple(out)


@reader("model")
class ModelReader:
    def __init__(self, engine: Any, tokenizer: Any, context_tokens: int = 256, summary_tokens: int = 48,
                 answer_tokens: int = 24, name: str = "model") -> None:
        self.engine, self.tok = engine, tokenizer
        self.context_tokens, self.summary_tokens, self.answer_tokens = context_tokens, summary_tokens, answer_tokens
        self.name = f"{name}@v{engine.weights_version}"
        self.calls = 0
        self.prompt_tokens = 0

    def _prompt(self, messages: list[Message]) -> tuple[int, ...]:
        from posttrain.rollout.prompting import encode_prompt

        return encode_prompt(self.tok, messages)

    def _generate(self, messages: list[Message], max_new: int) -> str:
        ids = self._prompt(messages)
        self.calls += 1
        self.prompt_tokens += len(ids)
        out = self.engine.generate([GenRequest(ids, SamplingParams(temperature=0.0, max_new_tokens=max_new))])
        return out[0].text if out else ""

    def overhead(self, question: str) -> int:
        """Prompt tokens of an answer call with an empty context."""
        return len(self._prompt(self._answer_messages(question, "")))

    def chunk_budget(self, question: str = "What is the value of X?") -> int:
        """Largest chunk that fits one answer call in the model's context."""
        return max(16, self.context_tokens - self.overhead(question) - self.answer_tokens - 24)

    def _summary_messages(self, chunk: Chunk, focus: str | None) -> list[Message]:
        ask = "Summarise this passage in one line" + (f", focusing on: {focus}" if focus else "") + "."
        budget = self.context_tokens - self.summary_tokens - 32
        return [Message("user", f"{ask}\n{chunk.text[: max(0, budget)]}")]  # char bound: long chunks are cut

    def summarize(self, chunk: Chunk, focus: str | None = None) -> str:
        return self._generate(self._summary_messages(chunk, focus), self.summary_tokens).strip()

    def summarize_many(self, chunks: Sequence[Chunk]) -> list[str]:
        """All summaries in one engine call (the engine batches; order is kept)."""
        return [t.strip() for t in self._generate_many([self._summary_messages(c, None) for c in chunks], self.summary_tokens)]

    def _generate_many(self, batch: list[list[Message]], max_new: int) -> list[str]:
        reqs = [GenRequest(self._prompt(m), SamplingParams(temperature=0.0, max_new_tokens=max_new), id=str(i)) for i, m in enumerate(batch)]
        self.calls += len(reqs)
        self.prompt_tokens += sum(len(r.prompt_ids) for r in reqs)
        outs = self.engine.generate(reqs) if reqs else []
        by_id = {o.request_id: o.text for o in outs}
        return [by_id.get(str(i), "") for i in range(len(reqs))]

    def _answer_messages(self, question: str, context: str) -> list[Message]:
        return [Message("system", SYSTEM), Message("user", f"{context}\nQuestion: {question}")]

    def _fits(self, question: str, chunks: Sequence[Chunk]) -> bool:
        n = len(self._prompt(self._answer_messages(question, render_context(list(chunks)))))
        return n + self.answer_tokens <= self.context_tokens

    def _answer_once(self, question: str, chunks: Sequence[Chunk]) -> list[Claim]:
        text = self._generate(self._answer_messages(question, render_context(list(chunks))), self.answer_tokens)
        return self._parse(text, chunks)

    def _parse(self, text: str, chunks: Sequence[Chunk]) -> list[Claim]:
        first = text.strip().splitlines()[0] if text.strip() else ""
        if not first or "not found" in first.lower():
            return []
        ids = set(_CITE.findall(first))
        value = _CITE.sub("", first).strip().rstrip(".").strip()
        if not value:
            return []
        named = [c for c in chunks if c.id in ids]
        return [Claim(value, ground(value, named) or ground(value, chunks))]

    def answer(self, question: str, context: Sequence[Chunk]) -> list[Claim]:
        if not context:
            return []
        if self._fits(question, context):
            return self._answer_once(question, context)
        fitted = [self._fit_chunk(question, c) for c in context]  # map: one chunk per request
        texts = self._generate_many([self._answer_messages(question, render_context([c])) for c in fitted], self.answer_tokens)
        return [claim for c, t in zip(fitted, texts) for claim in self._parse(t, [c])]  # reduce: pool; verify decides

    def _fit_chunk(self, question: str, c: Chunk) -> Chunk:
        """`c`, cut at the end until one answer call fits the context (offsets stay true)."""
        lo, hi = 0, len(c.text)
        if self._fits(question, [c]):
            return c
        while lo < hi:  # longest prefix that fits (binary search)
            mid = (lo + hi + 1) // 2
            probe = dataclasses.replace(c, text=c.text[:mid], end=c.start + mid)
            lo, hi = (mid, hi) if self._fits(question, [probe]) else (lo, mid - 1)
        return dataclasses.replace(c, text=c.text[:lo], end=c.start + lo)


class ModelSupport:
    """NLI-style support check by the model: 1.0 when it answers "yes", else 0.0."""

    def __init__(self, engine: Any, tokenizer: Any) -> None:
        self.engine, self.tok = engine, tokenizer

    def support(self, claim: str, span: str, question: str) -> float:
        from posttrain.rollout.prompting import encode_prompt

        msg = f"Passage: {span}\nQuestion: {question}\nClaimed answer: {claim}\nDoes the passage state this answer? Reply yes or no."
        ids = encode_prompt(self.tok, [Message("user", msg)])
        out = self.engine.generate([GenRequest(ids, SamplingParams(temperature=0.0, max_new_tokens=3))])
        return 1.0 if out and out[0].text.strip().lower().startswith("yes") else 0.0
