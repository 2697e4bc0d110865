"""Hybrid ranking over the index, and merging the winners into a reading context.

    ranked = rank(index, question, top_k=5)      # [Ranked(chunk, score, parts)]
    context = merge(ranked)                      # chunks in source order, deduplicated

score = w_text * bm25(chunk text + section path) + w_summary * bm25(summary), each part
divided by its maximum over the document so the weights mean what they say (the weights
are scaled to sum to 1). When the question names a printed page ("see [Arrays],
page 20") and the chunks carry page labels (a PDF), chunks on that page get `PAGE_WEIGHT`
more: the index follows the cross-reference the way a reader does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from posttrain.longctx.chunk import Chunk
from posttrain.longctx.index import DocIndex
from posttrain.longctx.tokens import terms

DEFAULT_WEIGHTS: Mapping[str, float] = {"text": 0.65, "summary": 0.25}
PAGE_WEIGHT = 0.5  # added for chunks on a printed page the question names ("[Graphics], page 68")
_PAGE_REF = re.compile(r"\b(?:pages?|pp?\.)\s*([0-9]{1,5}|[ivxlcdm]{1,8})\b", re.I)


def page_refs(question: str) -> set[str]:
    """Printed page labels a question names: "page 68", "p. 12", "pages iv"."""
    return {m.group(1).lower() for m in _PAGE_REF.finditer(question)}


@dataclass(frozen=True)
class Ranked:
    chunk: Chunk
    score: float
    parts: Mapping[str, float] = field(default_factory=dict)


def _normalise(xs: list[float]) -> list[float]:
    top = max(xs, default=0.0)
    return [max(x, 0.0) / top for x in xs] if top > 0 else [0.0] * len(xs)


def rank(index: DocIndex, question: str, top_k: int = 5, weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> list[Ranked]:
    """The top_k chunks by hybrid score, best first; ties keep source order."""
    if not index.chunks or top_k < 1:
        return []
    q = terms(question)
    parts = {"text": _normalise(index.text_bm25.scores(q)), "summary": _normalise(index.summary_bm25.scores(q))}
    total = sum(weights.values()) or 1.0
    w = {k: v / total for k, v in weights.items()}
    refs = page_refs(question)
    if refs and any(c.label for c in index.chunks):  # a cross-page reference: follow it to the page
        parts["page"] = [1.0 if c.label.lower() in refs else 0.0 for c in index.chunks]
        w["page"] = PAGE_WEIGHT
    scores = [sum(w.get(k, 0.0) * parts[k][i] for k in parts) for i in range(len(index.chunks))]
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:top_k]
    return [Ranked(index.chunks[i], scores[i], {k: parts[k][i] for k in parts}) for i in order]


def merge(ranked: list[Ranked]) -> list[Chunk]:
    """The ranked chunks in document order, each once: what the reader reads."""
    seen: dict[str, Chunk] = {}
    for r in ranked:
        seen.setdefault(r.chunk.id, r.chunk)
    return sorted(seen.values(), key=lambda c: c.start)


def render_context(chunks: list[Chunk]) -> str:
    """The merged context as the model sees it: each chunk labelled with id, path, offsets."""
    parts = []
    for c in chunks:
        path = " > ".join(c.path) or "(no section)"
        parts.append(f"[{c.id} | {path} | {c.start}-{c.end}]\n{c.text}")
    return "\n\n".join(parts)
