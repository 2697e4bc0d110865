"""Chunks of a PDF: never across a page, cut at outline headings, each with its page label.

    pdf = load_pdf("R-intro.pdf")
    chunks = split_pdf(pdf, max_tokens=512, tokenizer=tok)
    chunks[9].page, chunks[9].label, chunks[9].path   # 8, "3", ("1 Introduction ...", "1.2 ...")
    pdf.text[c.start:c.end] == c.text                  # offsets index the joined page text

A chunk's section path is the PDF outline (bookmarks) open at its first character: an
outline entry takes effect where its title is printed on its target page (the first line
holding the title), or at the top of that page when the title is not found. Inside a
segment, lines pack greedily up to `max_tokens` (then words, then characters), as in
`chunk.split_by_structure`.
"""

from __future__ import annotations

import re

from posttrain.errors import ConfigError
from posttrain.longctx.chunk import Chunk, _Packer, _units
from posttrain.longctx.tokens import TokenCounter, TokenizerLike
from posttrain.tasks.documents.pdf import Heading, PdfDoc

_LINES = re.compile(r"\n+")
_SPACE = re.compile(r"\s+")


def _title_at(pdf: PdfDoc, h: Heading, after: int) -> int:
    """Offset in `pdf.text` where heading `h` starts: its title's line on its page, else the page top."""
    s, e = pdf.starts[h.page], pdf.ends[h.page]
    if not h.title:
        return s
    at = pdf.text.find(h.title, max(s, after), e)
    if at < 0:
        at = pdf.text.find(h.title.split()[-1], max(s, after), e) if len(h.title.split()) > 1 else -1
    return s if at < 0 else pdf.text.rfind("\n", s, at) + 1 or s


def heading_events(pdf: PdfDoc) -> list[tuple[int, Heading]]:
    """(offset, heading) for every outline entry, in document order."""
    out: list[tuple[int, Heading]] = []
    last_page, last_at = -1, 0
    for h in sorted(pdf.outline, key=lambda h: h.page):
        if not 0 <= h.page < len(pdf.pages):
            continue
        at = _title_at(pdf, h, last_at if h.page == last_page else 0)
        out.append((at, h))
        last_page, last_at = h.page, at
    return sorted(out, key=lambda x: x[0])


def split_pdf(pdf: PdfDoc, max_tokens: int, tokenizer: TokenizerLike) -> list[Chunk]:
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    counter = TokenCounter(tokenizer)
    doc = pdf.text
    packer = _Packer(doc, counter, max_tokens)
    events = heading_events(pdf)
    lines = lambda s, e: _units(doc, s, e, _LINES)  # noqa: E731
    words = lambda s, e: _units(doc, s, e, _SPACE)  # noqa: E731
    chunks: list[Chunk] = []
    stack: list[Heading] = []
    k = 0
    for page in pdf.pages:
        s, e = pdf.starts[page.index], pdf.ends[page.index]
        cuts = sorted({s} | {at for at, _ in events if s < at < e})
        for a, b in zip(cuts, cuts[1:] + [e]):
            while k < len(events) and events[k][0] <= a:
                h = events[k][1]
                stack = [x for x in stack if x.level < h.level] + [h]
                k += 1
            path = tuple(x.title for x in stack)
            for u, v in packer.pack(lines(a, b), [words]):
                text = doc[u:v]
                if text.strip():
                    i = len(chunks)
                    chunks.append(Chunk(f"c{i}", i, u, v, text, path, "page", page.index + 1, counter.count(text), page.label))
    return chunks
