"""The long-document QA pipeline: index first, read deeply second, verify always.

    ld = LongDoc(doc, reader, tokenizer, max_tokens=512)   # chunks + index, built once
    res = ld.ask("What is the access code for vault Orion?", top_k=5)
    res.answer, res.confidence, res.verified.claims, res.cost

Per question the reader reads only the merged top-k chunks; the per-chunk summaries are
built once per document and cached (`SummaryCache`), so `Cost` separates the deep read
(`read_tokens`, what a question costs once the index exists) from the index build
(`index_tokens`, paid on cache misses only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from posttrain.longctx.chunk import Chunk, split_by_structure
from posttrain.longctx.index import DocIndex, SummaryCache
from posttrain.longctx.rank import Ranked, merge, rank
from posttrain.longctx.reader import Claim, Reader
from posttrain.longctx.tokens import TokenCounter, TokenizerLike
from posttrain.longctx.verify import Supporter, Verified, verify


@dataclass(frozen=True)
class Cost:
    doc_tokens: int  # the whole document under the reader's tokenizer
    read_tokens: int  # chunk tokens the answer step read for this question
    index_tokens: int  # chunk tokens summarised for this question (cache misses only)
    cache_hits: int
    cache_misses: int
    wall_s: float

    @property
    def read_fraction(self) -> float:
        return self.read_tokens / self.doc_tokens if self.doc_tokens else 0.0


@dataclass(frozen=True)
class Result:
    question: str
    answer: str  # "not found" below the confidence threshold
    found: bool
    confidence: float
    verified: Verified
    draft: tuple[Claim, ...]  # the reader's claims before verification
    ranked: tuple[Ranked, ...]
    context: tuple[Chunk, ...]
    cost: Cost
    trace: dict[str, Any] = field(default_factory=dict)


class LongDoc:
    """One document, chunked and indexed once, asked any number of questions."""

    def __init__(
        self,
        doc: str,
        reader: Reader,
        tokenizer: TokenizerLike,
        max_tokens: int = 8000,
        cache: SummaryCache | None = None,
        chunks: list[Chunk] | None = None,
    ) -> None:
        self.doc, self.reader = doc, reader
        self.counter = TokenCounter(tokenizer)
        # a PDF comes pre-chunked by page (pdf_chunk.split_pdf); text is chunked by structure here
        self.chunks = chunks if chunks is not None else split_by_structure(doc, max_tokens, tokenizer)
        self.doc_tokens = self.counter.count(doc)
        self.cache = cache if cache is not None else SummaryCache()
        self._index: DocIndex | None = None

    def index(self) -> tuple[DocIndex, int, int, int]:
        """(index, tokens summarised, cache hits, cache misses) for this call."""
        if self._index is not None:
            n = len(self.chunks)  # every summary of a built index is a cache hit
            return self._index, 0, n, 0
        h0, m0 = self.cache.hits, self.cache.misses
        self._index = DocIndex.build(self.chunks, self.reader, self.cache)
        return self._index, self._index.summary_tokens, self.cache.hits - h0, self.cache.misses - m0

    def ask(
        self,
        question: str,
        top_k: int = 5,
        threshold: float = 0.6,
        supporter: Supporter | None = None,
        flag_only: bool = False,
    ) -> Result:
        t0 = time.perf_counter()
        index, spent, hits, misses = self.index()
        ranked = rank(index, question, top_k)
        context = merge(ranked)
        draft = self.reader.answer(question, context) if context else []
        v = verify(draft, question, self.doc, index, supporter, threshold, flag_only=flag_only)
        cost = Cost(self.doc_tokens, sum(c.n_tokens for c in context), spent, hits, misses, time.perf_counter() - t0)
        trace = {"n_chunks": len(self.chunks), "top": [(r.chunk.id, round(r.score, 4)) for r in ranked]}
        return Result(question, v.answer, v.found, v.confidence, v, tuple(draft), tuple(ranked), tuple(context), cost, trace)
