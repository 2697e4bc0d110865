"""The Reader contract: the model's two steps in the long-document pipeline.

    summary = reader.summarize(chunk, focus=None)            # one index entry per chunk
    claims = reader.answer(question, context_chunks)         # claims with citations

A claim cites source spans by chunk id plus character offsets into the whole document.
`verify.py` checks every citation; a reader may cite loosely, never silently. Readers
register under kind "longctx_reader" (`@reader("oracle")`), so a run's config can name
one by `Spec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, TypeVar, runtime_checkable

from posttrain.longctx.chunk import Chunk
from posttrain.registry import registry

T = TypeVar("T")


@dataclass(frozen=True)
class Citation:
    chunk_id: str
    start: int  # offsets into the whole document, not into the chunk
    end: int
    page: str = ""  # the printed page the reader says it cites ("68"); checked against the chunk's page


@dataclass(frozen=True)
class Claim:
    text: str  # the answer statement (may be just the value, e.g. "4417")
    citations: tuple[Citation, ...] = ()


@runtime_checkable
class Reader(Protocol):
    """Summarises a chunk (cached per chunk) and answers a question from a context of chunks with claims."""

    name: str  # part of the summary-cache key: two readers never share summaries

    def summarize(self, chunk: Chunk, focus: str | None = None) -> str: ...

    def answer(self, question: str, context: Sequence[Chunk]) -> list[Claim]: ...


def reader(name: str) -> Callable[[T], T]:
    """Register a Reader factory: `build(Spec(name, args), kind="longctx_reader")`."""
    return registry("longctx_reader").register(name)
