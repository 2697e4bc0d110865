"""OracleReader: the generator's gold answer stands in for the model's answer step.

It isolates chunking, ranking and verification from model quality:
- `summarize` is extractive and knows nothing about gold: section path, first sentence
  and the chunk's capitalised names and numbers. Ranking therefore never sees gold.
- `answer` looks up the question's gold answer and span. It answers only when the gold
  span lies inside a chunk it was given (so a ranking miss is a miss), and it cites
  that span. With `noise > 0` it also behaves like a sloppy model, seeded per
  question: it mis-cites spans, fabricates values, and, when the gold is absent from
  its context or the question has no answer, it guesses with a citation anyway.
  Verification must catch all of these.

Limits: the oracle knows one gold span per question; multi-span answers are not modelled.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass
from typing import Mapping, Sequence

from posttrain.longctx.chunk import Chunk
from posttrain.longctx.reader import Citation, Claim, reader

_SENT = re.compile(r"[^.!?\n]+[.!?]?")
_NAMES = re.compile(r"\b(?:[A-Z][a-z]+|[A-Z]{2,}|\d[\d.,-]*)\b")


@dataclass(frozen=True)
class Gold:
    answer: str | None  # None: the document does not answer the question
    start: int = -1  # gold span offsets in the document
    end: int = -1


def _sentences(chunk: Chunk) -> list[tuple[int, int]]:
    out = []
    for m in _SENT.finditer(chunk.text):
        s, e = m.start(), m.end()
        while s < e and chunk.text[s].isspace():
            s += 1
        if e - s > 3:
            out.append((chunk.start + s, chunk.start + e))
    return out or [(chunk.start, chunk.end)]


@reader("oracle")
class OracleReader:
    name = "oracle-extractive-v1"

    def __init__(self, gold: Mapping[str, Gold] | None = None, noise: float = 0.0, seed: int = 0) -> None:
        self.gold = dict(gold or {})
        self.noise, self.seed = noise, seed

    def summarize(self, chunk: Chunk, focus: str | None = None) -> str:
        first = _sentences(chunk)[0]
        lead = chunk.text[first[0] - chunk.start : first[1] - chunk.start]
        names = list(dict.fromkeys(_NAMES.findall(chunk.text)))[:24]
        parts = [" / ".join(chunk.path), lead.strip(), " ".join(names)]
        return " :: ".join(p for p in parts if p)

    def answer(self, question: str, context: Sequence[Chunk]) -> list[Claim]:
        rng = random.Random(zlib.crc32(question.encode()) ^ self.seed)
        gold = self.gold.get(question, Gold(None))
        home = next((c for c in context if gold.answer and c.start <= gold.start and gold.end <= c.end), None)
        claims: list[Claim] = []
        if home is not None:
            cite = Citation(home.id, gold.start, gold.end)
            if rng.random() < self.noise:  # mis-cite: right value, wrong sentence
                other = rng.choice(list(context))
                s, e = rng.choice(_sentences(other))
                if not (s <= gold.start and gold.end <= e):
                    cite = Citation(other.id, s, e)
            claims.append(Claim(gold.answer, (cite,)))
            if rng.random() < self.noise:  # a fabricated second value on the gold span
                claims.append(Claim(str(rng.randrange(10_000, 99_999)), (Citation(home.id, gold.start, gold.end),)))
        elif context and rng.random() < self.noise * 4:  # guess anyway: a nearby value, cited
            claims.append(self._guess(context[0], rng))
        return claims

    def _guess(self, chunk: Chunk, rng: random.Random) -> Claim:
        """The typical long-context hallucination: a real value from a near-miss sentence."""
        doc_text = {(s, e): chunk.text[s - chunk.start : e - chunk.start] for s, e in _sentences(chunk)}
        with_numbers = [(span, t) for span, t in doc_text.items() if re.search(r"\d{3,}", t)]
        if not with_numbers:
            s, e = next(iter(doc_text))
            return Claim(str(rng.randrange(10_000, 99_999)), (Citation(chunk.id, s, e),))
        (s, e), text = rng.choice(with_numbers)
        value = rng.choice(re.findall(r"\d{3,}", text))
        return Claim(value, (Citation(chunk.id, s, e),))
