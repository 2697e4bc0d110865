"""Tables of a PDF as cell grids (pdfplumber), with tables that break across pages merged.

    tables = extract_tables("report.pdf", n_pages)   # [Table(pages, header, rows)]

pdfplumber finds ruled tables (lines drawn around cells) page by page. A table that runs
off the bottom of page k and continues at the top of page k+1 comes back as two pieces;
they are one table when the first piece closes its page (at most the page number below it),
the second opens the next page (at most a running head above it), and both have the same
number of columns. A repeated header row on the
continuation (what a report writer's `repeatRows` produces) is dropped.

Cells are stripped and inner whitespace (line wraps inside a cell) collapses to one space;
an empty cell is "". Limits: tables drawn without rules (aligned text only) are not found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Table:
    pages: tuple[int, ...]  # physical page indices it spans, in order
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _cell(x: object) -> str:
    return _WS.sub(" ", str(x)).strip() if x is not None else ""


def _text_lines(page, top: float, bottom: float) -> int:
    """Lines of text between heights `top` and `bottom` (running heads and footers count as one each)."""
    if bottom - top < 1:
        return 0
    words = page.crop((0, max(0.0, top), float(page.width), min(float(page.height), bottom))).extract_words()
    return len({round(float(w["top"])) for w in words})


def _page_tables(page) -> list[tuple[bool, bool, list[tuple[str, ...]]]]:
    """(opens the page, closes the page, rows) of each table on a pdfplumber page, top to bottom.

    A table opens its page when at most one line (a running head) stands above it, and
    closes it when at most one line (the page number) stands below it."""
    found = []
    for t in page.find_tables():
        rows = [tuple(_cell(c) for c in r) for r in t.extract()]
        rows = [r for r in rows if any(r)]
        if rows:
            found.append((float(t.bbox[1]), float(t.bbox[3]), rows))
    found.sort(key=lambda x: x[0])
    return [(_text_lines(page, 0.0, top) <= 1, _text_lines(page, bottom, float(page.height)) <= 1, rows)
            for top, bottom, rows in found]


def extract_tables(path: str | Path, n_pages: int | None = None) -> list[Table]:
    import pdfplumber

    pieces: list[tuple[int, bool, bool, list[tuple[str, ...]]]] = []  # (page, opens page, closes page, rows)
    with pdfplumber.open(str(path)) as pdf:
        for i, page in enumerate(pdf.pages[: n_pages or len(pdf.pages)]):
            for opens, closes, rows in _page_tables(page):
                pieces.append((i, opens, closes, rows))
            page.close()  # pdfplumber caches layout objects per page
    return merge_pieces(pieces)


def merge_pieces(pieces: list[tuple[int, bool, bool, list[tuple[str, ...]]]]) -> list[Table]:
    """Join each piece to the previous table when it continues it on the next page."""
    tables: list[tuple[list[int], tuple[str, ...], list[tuple[str, ...]], bool]] = []
    for page, opens, closes, rows in pieces:
        prev = tables[-1] if tables else None
        continues = (prev is not None and prev[3] and opens and prev[0][-1] == page - 1
                     and len(rows[0]) == len(prev[1]))
        if continues:
            body = rows[1:] if rows[0] == prev[1] else rows
            prev[0].append(page)
            prev[2].extend(body)
            tables[-1] = (prev[0], prev[1], prev[2], closes)
        else:
            tables.append(([page], rows[0], list(rows[1:]), closes))
    return [Table(tuple(pg), hd, tuple(rs)) for pg, hd, rs, _ in tables]
