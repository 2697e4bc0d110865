"""Second pass: check every citation against the source; drop what it does not support.

    v = verify(claims, question, doc, index)           # mode="citation-required"
    v.found, v.answer, v.confidence, v.claims, v.removed

A citation is valid when its chunk id exists, its offsets lie inside the document and
inside that chunk, the span is at most `max_span_chars` long (citing a whole
section proves nothing), and the page it names (if any) is the chunk's printed page: a
PDF chunk never crosses a page, so a span's page is its chunk's. `page_verify.py` checks
claims that cite printed pages only ("[p. 68]") against each page's whole text. A claim is supported when a valid citation's span supports it:
- lexically by default (`LexicalSupport`): every number in the claim appears in the
  span; the claim's content terms are covered; the question's content terms are covered
  by the span or its section path; and every named entity of the question (capitalised
  words, numbers, quoted strings) appears there, else the score is cut to 30%.
- by a model when one is configured (`ModelSupport` in model_reader.py, NLI-style).
Unsupported claims are removed (or kept and flagged with `flag_only=True`). Confidence is
the best kept claim's support; below `threshold` the answer is "not found".

Limits: lexical support cannot tell negation ("is not 12") from assertion, nor catch a
paraphrase that changes meaning without changing words; configure a model for that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from posttrain.longctx.index import DocIndex
from posttrain.longctx.reader import Citation, Claim
from posttrain.longctx.tokens import numbers, terms

NOT_FOUND = "not found"
_QUOTED = re.compile(r"\"([^\"]+)\"|'([^']{2,})'")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9-]*[A-Za-z0-9]\b")


@runtime_checkable
class Supporter(Protocol):
    def support(self, claim: str, span: str, question: str) -> float:
        """How well `span` (with its section path) supports `claim` as an answer, in [0, 1]."""
        ...


def question_entities(question: str) -> set[str]:
    """Terms the cited span must mention: quoted strings, numbers, capitalised words
    (the question's first word is skipped: it is capitalised by grammar, not by name)."""
    q = question.strip()
    rest = q.split(None, 1)[1] if len(q.split(None, 1)) == 2 else ""
    found = {t for t in terms(q) if t[0].isdigit()}
    for m in _QUOTED.finditer(q):
        found.update(terms(m.group(1) or m.group(2)))
    for m in _CAPITALISED.finditer(rest):
        found.update(terms(m.group()))
    return found


class LexicalSupport:
    def support(self, claim: str, span: str, question: str) -> float:
        if not numbers(claim) <= numbers(span):
            return 0.0
        ct, st = set(terms(claim)), set(terms(span))
        if not ct:
            return 0.0
        claim_cov = len(ct & st) / len(ct)
        qt = set(terms(question)) - ct
        q_cov = len(qt & st) / len(qt) if qt else 1.0
        gate = 1.0 if question_entities(question) <= st else 0.3
        return claim_cov * (0.2 + 0.8 * q_cov) * gate


@dataclass(frozen=True)
class CheckedClaim:
    claim: Claim
    support: float
    reason: str  # "" when supported; else why it was removed or flagged
    citations: tuple[Citation, ...]  # the valid citations that support it


@dataclass(frozen=True)
class Verified:
    found: bool
    answer: str
    confidence: float
    claims: tuple[CheckedClaim, ...]  # kept (supported, or flagged when flag_only)
    removed: tuple[CheckedClaim, ...]


def _citation_error(c: Citation, doc: str, index: DocIndex, max_span: int) -> str:
    chunk = index.by_id.get(c.chunk_id)
    if chunk is None:
        return f"unknown chunk id {c.chunk_id!r}"
    if not (0 <= c.start < c.end <= len(doc)):
        return f"offsets {c.start}-{c.end} outside the document (0-{len(doc)})"
    if not (chunk.start <= c.start and c.end <= chunk.end):
        return f"offsets {c.start}-{c.end} outside chunk {c.chunk_id} ({chunk.start}-{chunk.end})"
    if c.end - c.start > max_span:
        return f"span of {c.end - c.start} chars is longer than {max_span}"
    page = chunk.label or str(chunk.page)
    if c.page and c.page != page:  # chunks never cross pages: the span's page is its chunk's
        return f"cites page {c.page}, but chunk {c.chunk_id} (offsets {c.start}-{c.end}) is on page {page}"
    return ""


def check_claim(claim: Claim, question: str, doc: str, index: DocIndex, supporter: Supporter, threshold: float, max_span: int) -> CheckedClaim:
    if not claim.citations:
        return CheckedClaim(claim, 0.0, "no citation (citation-required)", ())
    best, good, reasons = 0.0, [], []
    for c in claim.citations:
        err = _citation_error(c, doc, index, max_span)
        if err:
            reasons.append(err)
            continue
        chunk = index.by_id[c.chunk_id]
        s = supporter.support(claim.text, " ".join(chunk.path) + "\n" + doc[c.start : c.end], question)
        best = max(best, s)
        if s >= threshold:
            good.append(c)
        else:
            reasons.append(f"span {c.start}-{c.end} does not support the claim (support {s:.2f})")
    return CheckedClaim(claim, best, "" if good else "; ".join(reasons), tuple(good))


def verify(
    claims: Sequence[Claim],
    question: str,
    doc: str,
    index: DocIndex,
    supporter: Supporter | None = None,
    threshold: float = 0.6,
    max_span_chars: int = 600,
    flag_only: bool = False,
) -> Verified:
    supporter = supporter or LexicalSupport()
    checked = [check_claim(c, question, doc, index, supporter, threshold, max_span_chars) for c in claims]
    ok = sorted((c for c in checked if not c.reason), key=lambda c: -c.support)
    bad = [c for c in checked if c.reason]
    confidence = ok[0].support if ok else 0.0
    found = bool(ok) and confidence >= threshold
    kept = tuple(ok) + (tuple(bad) if flag_only else ())
    return Verified(found, ok[0].claim.text if found else NOT_FOUND, confidence, kept, () if flag_only else tuple(bad))
