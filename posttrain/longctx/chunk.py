"""Structure-aware chunking under a token budget.

    chunks = split_by_structure(doc, max_tokens=8000, tokenizer=tok)
    doc[chunks[3].start:chunks[3].end] == chunks[3].text   # offsets index the source

Sections (headings, numbered sections), pages and tables come from `structure.py`. A
chunk never crosses a section or page boundary; inside a section, consecutive blocks
pack greedily up to `max_tokens`. A table stays in one chunk when it fits, alone or
with its neighbours; a table larger than the budget splits between rows, and a
paragraph larger than the budget splits between sentences, then words, then characters.
A chunk's token count is measured on its exact source span with the given tokenizer,
so `n_tokens <= max_tokens` holds for every chunk.

Limits: a heading-only section (a title directly followed by a sub-heading) is folded
into the next chunk, so one chunk may start with its parent's title. Table rows split
across chunks do not repeat the header row (offsets stay contiguous in the source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from posttrain.errors import ConfigError
from posttrain.longctx.structure import Block, parse_blocks
from posttrain.longctx.tokens import TokenCounter, TokenizerLike

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Chunk:
    id: str  # "c<index>", stable for a (document, max_tokens, tokenizer)
    index: int
    start: int  # character offsets into the source: text == doc[start:end]
    end: int
    text: str
    path: tuple[str, ...]  # enclosing section titles, outermost first
    kind: str  # "section" | "table" | "page" | "paragraph"
    page: int  # 1-based physical page (1 for a document without pages)
    n_tokens: int
    label: str = ""  # the printed page label, for chunks of a PDF ("68", "iv")


def _units(doc: str, s: int, e: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Sub-spans of doc[s:e] separated by `pattern` matches (separators excluded)."""
    out, pos = [], s
    for m in pattern.finditer(doc, s, e):
        if m.start() > pos:
            out.append((pos, m.start()))
        pos = m.end()
    if pos < e:
        out.append((pos, e))
    return out


def _lines(doc: str, s: int, e: int) -> list[tuple[int, int]]:
    return _units(doc, s, e, re.compile(r"\n+"))


class _Packer:
    """Greedy packing of contiguous source spans into pieces of at most `max_tokens`."""

    def __init__(self, doc: str, counter: TokenCounter, max_tokens: int) -> None:
        self.doc, self.count, self.max = doc, counter.count, max_tokens

    def fits(self, s: int, e: int) -> bool:
        return self.count(self.doc[s:e]) <= self.max

    def pack(self, units: list[tuple[int, int]], finer: list[Callable[[int, int], list[tuple[int, int]]]]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        cur: tuple[int, int] | None = None
        for s, e in units:
            if cur is not None and self.fits(cur[0], e):
                cur = (cur[0], e)
                continue
            if cur is not None:
                out.append(cur)
                cur = None
            if self.fits(s, e):
                cur = (s, e)
            else:
                out.extend(self.split(s, e, finer))
        if cur is not None:
            out.append(cur)
        return out

    def split(self, s: int, e: int, finer: list[Callable[[int, int], list[tuple[int, int]]]]) -> list[tuple[int, int]]:
        """Split an over-budget span with the next finer unit; characters last."""
        if finer:
            units = finer[0](s, e)
            if len(units) > 1:
                return self.pack(units, finer[1:])
            return self.split(s, e, finer[1:])
        return self.hard_cut(s, e)

    def hard_cut(self, s: int, e: int) -> list[tuple[int, int]]:
        out = []
        while s < e:
            lo, hi = s + 1, e  # largest end with doc[s:end] within budget (binary search)
            if not self.fits(s, lo):
                n = self.count(self.doc[s:lo])
                raise ConfigError(f"max_tokens={self.max} is too small: the character at offset {s} alone takes {n} tokens")
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if self.fits(s, mid) else (lo, mid - 1)
            out.append((s, lo))
            s = lo
            while s < e and self.doc[s].isspace():
                s += 1
        return out


def _sections(blocks: list[Block]) -> list[list[Block]]:
    """Consecutive blocks sharing a section path and page; heading-only sections fold forward."""
    groups: list[list[Block]] = []
    for b in blocks:
        prev = groups[-1] if groups else None
        new = prev is None or b.kind == "heading" or b.page != prev[-1].page or b.path != prev[-1].path
        if new and prev is not None and b.kind == "heading" and len(prev) == 1 and prev[0].kind == "heading" and b.page == prev[0].page:
            new = False  # fold a bare title into its first sub-section
        if new:
            groups.append([b])
        else:
            groups[-1].append(b)
    return groups


def split_by_structure(doc: str, max_tokens: int, tokenizer: TokenizerLike) -> list[Chunk]:
    """Chunks covering every non-blank block of `doc`, in source order."""
    if not isinstance(doc, str):
        raise ConfigError(f"document must be str, got {type(doc).__name__}")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    counter = TokenCounter(tokenizer)
    packer = _Packer(doc, counter, max_tokens)
    blocks = parse_blocks(doc)
    has_headings = any(b.kind == "heading" for b in blocks)
    has_pages = any(b.page > 1 for b in blocks)
    sentences = lambda s, e: _units(doc, s, e, _SENTENCE_END)  # noqa: E731
    words = lambda s, e: _units(doc, s, e, _SPACE)  # noqa: E731
    lines = lambda s, e: _lines(doc, s, e)  # noqa: E731
    spans: list[tuple[int, int, Block, bool]] = []  # (start, end, first block, all-table)
    for group in _sections(blocks):
        cur: list[Block] = []
        for b in group:
            if cur and packer.fits(cur[0].start, b.end):
                cur.append(b)
                continue
            if cur:
                spans.append((cur[0].start, cur[-1].end, cur[-1], all(x.kind == "table" for x in cur)))
                cur = []
            if packer.fits(b.start, b.end):
                cur = [b]
                continue
            finer = [lines, words] if b.kind == "table" else [lines, sentences, words]
            for s, e in packer.split(b.start, b.end, finer):
                spans.append((s, e, b, b.kind == "table"))
        if cur:
            spans.append((cur[0].start, cur[-1].end, cur[-1], all(x.kind == "table" for x in cur)))
    default_kind = "section" if has_headings else "page" if has_pages else "paragraph"
    chunks = []
    for i, (s, e, b, is_table) in enumerate(spans):
        text = doc[s:e]
        chunks.append(Chunk(f"c{i}", i, s, e, text, b.path, "table" if is_table else default_kind, b.page, counter.count(text)))
    return chunks
