"""The per-chunk index: a summary from the reader, and BM25 over text and over summaries.

    cache = SummaryCache()                       # shared across questions on a document
    idx = DocIndex.build(chunks, reader, cache)  # summaries come from the cache when seen

Summaries are computed without a question focus so they can be cached per chunk and
reused by every later question (the index is paid once per document; see `Cost`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from posttrain.longctx.chunk import Chunk
from posttrain.longctx.reader import Reader
from posttrain.longctx.tokens import terms


class SummaryCache:
    """Summaries keyed by (reader name, sha256 of chunk text); optional JSON persistence."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self.hits = 0
        self.misses = 0
        self._data: dict[str, str] = {}
        if self.path and self.path.is_file():
            try:
                self._data = dict(json.loads(self.path.read_text()))
            except (ValueError, OSError):
                self._data = {}  # a corrupt cache is a cold cache, not an error

    @staticmethod
    def key(reader_name: str, text: str) -> str:
        return reader_name + ":" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def get(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: str, value: str) -> None:
        self._data[key] = value

    def save(self) -> None:
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self._data))


class _BM25:
    """rank_bm25's Okapi BM25, guarded against an empty corpus (all-empty documents)."""

    def __init__(self, docs: list[list[str]]) -> None:
        self.n = len(docs)
        self.model: Any = None
        if any(docs):
            from rank_bm25 import BM25Okapi

            self.model = BM25Okapi([d or ["\x00"] for d in docs])

    def scores(self, query: list[str]) -> list[float]:
        if self.model is None or not query:
            return [0.0] * self.n
        return [float(x) for x in self.model.get_scores(query)]

    def idf(self, term: str) -> float:
        if self.model is None:
            return 1.0
        return float(self.model.idf.get(term, max(self.model.idf.values(), default=1.0)))


@dataclass
class DocIndex:
    chunks: list[Chunk]
    summaries: list[str]
    text_bm25: _BM25
    summary_bm25: _BM25
    summary_tokens: int = 0  # reader input tokens spent building summaries (cache misses)
    by_id: dict[str, Chunk] = field(default_factory=dict)

    @classmethod
    def build(cls, chunks: Sequence[Chunk], reader: Reader, cache: SummaryCache | None = None) -> "DocIndex":
        cache = cache if cache is not None else SummaryCache()
        keys = [SummaryCache.key(reader.name, c.text) for c in chunks]
        summaries: list[str | None] = [cache.get(k) for k in keys]
        todo = [i for i, s in enumerate(summaries) if s is None]
        many = getattr(reader, "summarize_many", None)  # one batched engine call when offered
        fresh = many([chunks[i] for i in todo]) if many and todo else [reader.summarize(chunks[i], None) for i in todo]
        for i, s in zip(todo, fresh):
            summaries[i] = s
            cache.put(keys[i], s)
        spent = sum(chunks[i].n_tokens for i in todo)
        text_docs = [terms(" ".join(c.path) + "\n" + c.text) for c in chunks]
        done = [s or "" for s in summaries]
        idx = cls(list(chunks), done, _BM25(text_docs), _BM25([terms(s) for s in done]), summary_tokens=spent)
        idx.by_id = {c.id: c for c in chunks}
        return idx
