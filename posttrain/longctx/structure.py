"""Parse a document into structural blocks: headings, tables, paragraphs, page breaks.

    blocks = parse_blocks(doc)   # [Block(start, end, kind, path, page)], in source order

Recognised structure (anything else is paragraph text, split at blank lines):
- Markdown ATX headings (`#` .. `######`).
- Numbered section headings: `3 Scope`, `2.1 Definitions`, `4.2.7) Limits`, and
  `Chapter 4` / `Section 2: Terms` / `Part II` / `Article 9` / `Appendix A` lines. A
  numbered line that ends in sentence punctuation or runs past 12 words is a list item,
  not a heading.
- Pages: a form feed (\\f) or a page-marker line (`Page 3`, `- 3 of 40 -`, `[page 7]`,
  `<!-- page 7 -->`) starts a new page.
- Tables: consecutive pipe-table rows (`| a | b |`) or grid-table lines (`+---+`).

Limits: setext headings (underlined with === or ---), HTML, and tables without pipes
(tab- or space-aligned columns) are read as paragraphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"[^\n\f]*(?:\n|\f|$)")
_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_NUM_HEADING = re.compile(r"^ {0,3}((?:\d{1,3}\.)*\d{1,3})[.)]?[ \t]+(\S.*?)\s*$")
_WORD_HEADING = re.compile(
    r"^ {0,3}(chapter|part|section|article|appendix)[ \t]+([0-9]+|[IVXLC]+|[A-Z])\b[.:]?[ \t]*(.*?)\s*$", re.I
)
_PAGE_MARK = re.compile(
    r"^\s*(?:<!--\s*page\s+\d+\s*-->|\[\s*page\s+\d+\s*\]|-*\s*page\s+\d+(?:\s+of\s+\d+)?\s*-*|-+\s*\d+\s+of\s+\d+\s*-+)\s*$",
    re.I,
)
_TABLE_ROW = re.compile(r"^\s*(?:\|.*\||\+[-=+:]+\+)\s*$")
_WORD_LEVEL = {"part": 1, "chapter": 1, "section": 2, "article": 2, "appendix": 1}


@dataclass(frozen=True)
class Block:
    start: int  # offset of the block's first character in the source
    end: int  # offset one past its last non-newline character
    kind: str  # "heading" | "table" | "para"
    path: tuple[str, ...]  # section titles enclosing the block (a heading includes itself)
    page: int  # 1-based; 1 when the document has no page breaks


def _heading(line: str) -> tuple[int, str] | None:
    """(level, title) when `line` is a section heading."""
    m = _MD_HEADING.match(line)
    if m:
        return len(m.group(1)), m.group(2).strip()
    m = _WORD_HEADING.match(line)
    if m and len(line.split()) <= 12 and not line.rstrip().endswith((".", ";", ",")):
        return _WORD_LEVEL[m.group(1).lower()], line.strip()
    m = _NUM_HEADING.match(line)
    if m:
        title = m.group(2)
        words = title.split()
        if title[0].isupper() and len(words) <= 12 and not title.endswith((".", ";", ",", ":", "?", "!")):
            return m.group(1).count(".") + 1, line.strip()
    return None


def parse_blocks(doc: str) -> list[Block]:
    """Blocks in source order; blank lines separate paragraphs and are never inside one."""
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []  # open headings: (level, title)
    page = 1
    cur: list[int] | None = None  # [start, end] of the open paragraph or table
    cur_kind = ""

    def close() -> None:
        nonlocal cur
        if cur is not None:
            blocks.append(Block(cur[0], cur[1], cur_kind, tuple(t for _, t in stack), page))
            cur = None

    for m in _LINE.finditer(doc):
        raw = m.group()
        if not raw:
            break
        s = m.start()
        line = raw.rstrip("\n\f")
        stripped = line.strip()
        if _PAGE_MARK.match(line) and stripped:
            close()
            page += 1 if blocks or s > 0 else 0
        elif not stripped:
            close()
        elif (h := _heading(line)) is not None:
            close()
            level, title = h
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            lead = len(line) - len(line.lstrip())
            blocks.append(Block(s + lead, s + len(line.rstrip()), "heading", tuple(t for _, t in stack), page))
        else:
            kind = "table" if _TABLE_ROW.match(line) else "para"
            if cur is not None and kind != cur_kind:
                close()
            if cur is None:
                lead = len(line) - len(line.lstrip())
                cur, cur_kind = [s + lead, s + len(line.rstrip())], kind
            else:
                cur[1] = s + len(line.rstrip())
        if raw.endswith("\f"):
            close()
            page += 1
    close()
    return blocks
