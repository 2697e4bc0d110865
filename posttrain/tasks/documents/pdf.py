"""Reading a PDF into pages: text per physical page, its printed label, the outline, tables.

    pdf = load_pdf("R-intro.pdf")                 # PdfDoc; raises DocumentError naming the file
    pdf.pages[6].label == "1"                     # the printed page number, not the index
    pdf.text[pdf.starts[6]:pdf.ends[6]]           # page 7's text inside the joined document
    pdf.page_at(offset), pdf.by_label("68")       # offset -> page index, printed label -> index
    pdf = load_pdf("report.pdf", tables=True)     # + pdf.tables: cell grids, merged across pages

Text comes from pdfium (`pypdfium2`, a few ms a page); the joined text puts a form feed
between pages so `structure.py` and every offset-based citation keep working. The label is
the PDF's own page label when it has them (`/PageLabels`), else the printed number read
off the page's first or last line (`printed_numbers`), else the physical page number.
Tables (`pdfplumber`, about 0.1-0.3 s a page, so only when asked) are cell grids; a table
that continues on the next page (same columns, at the top of the next page, its repeated
header dropped) is merged into one `Table` spanning both pages.

Bad input is refused with one line naming the file, before any page is read: a missing
file, one over `max_bytes`, one that is not a PDF, an encrypted or corrupt PDF, and a PDF
without any text layer (image-only: it needs OCR). A single image-only page inside a text
PDF is kept, listed in `pdf.image_only` (its text is empty, and it is reported, never read
as a blank page).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.tasks.documents.pdf_tables import Table, extract_tables



class DocumentError(PosttrainError):
    """A document that cannot be read; the message names the file and what is wrong."""


DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_ROMAN = re.compile(r"^(?=[ivxlcdm]+$)m{0,4}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$", re.I)
_NUMBER = re.compile(r"^\d{1,5}$")


@dataclass(frozen=True)
class Page:
    index: int  # physical page, 0-based
    label: str  # the printed page number ("1", "iv", "T-1")
    text: str
    image_only: bool = False  # no text layer, but pictures: a scanned page


@dataclass(frozen=True)
class Heading:
    level: int  # 0 = top level of the outline
    title: str
    page: int  # physical page index the entry points at


@dataclass
class PdfDoc:
    path: Path
    pages: list[Page]
    outline: list[Heading]
    tables: list[Table] = field(default_factory=list)
    text: str = ""  # page texts joined by "\f"
    starts: list[int] = field(default_factory=list)  # offset of each page's text in `text`
    ends: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        pos, parts = 0, []
        for p in self.pages:
            self.starts.append(pos)
            parts.append(p.text)
            pos += len(p.text)
            self.ends.append(pos)
            pos += 1  # the "\f"
        self.text = "\f".join(parts)
        self._labels = {}
        for p in self.pages:
            self._labels.setdefault(p.label, p.index)

    @property
    def image_only(self) -> list[int]:
        return [p.index for p in self.pages if p.image_only]

    def page_at(self, offset: int) -> int:
        """The physical page index holding character `offset` of `text`."""
        return max(0, bisect.bisect_right(self.starts, offset) - 1)

    def by_label(self, label: str) -> int | None:
        return self._labels.get(str(label).strip())

    def page_text(self, index: int) -> str:
        return self.text[self.starts[index] : self.ends[index]]


def printed_numbers(text: str) -> set[str]:
    """Page-number candidates printed on a page: the first/last token of its first and last line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    out: set[str] = set()
    for ln in (lines[:1] + lines[-1:]) if lines else []:
        toks = ln.split()
        for t in (toks[0], toks[-1]):
            if _NUMBER.match(t) or _ROMAN.match(t):
                out.add(t)
    return out


def _clean(text: str) -> str:
    # pdfium marks a hyphenation point with U+FFFE and ends lines with \r\n
    return text.replace("\ufffe", "").replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")


def _open(p: Path, max_bytes: int):  # -> pypdfium2.PdfDocument
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise DocumentError(f"reading {p} needs pypdfium2: pip install 'posttrain[documents]'") from None

    if not p.exists():
        raise DocumentError(f"document not found: {p}")
    if not p.is_file():
        raise DocumentError(f"document is not a regular file: {p}")
    size = p.stat().st_size
    if size > max_bytes:
        raise DocumentError(f"document {p} is {size} bytes, over the configured limit of {max_bytes} (max_bytes)")
    with p.open("rb") as f:
        head = f.read(1024)
    if b"%PDF-" not in head:
        raise DocumentError(f"document {p} is not a PDF (no %PDF- header)")
    try:
        return pdfium.PdfDocument(str(p))
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():
            raise DocumentError(f"document {p} is an encrypted PDF (a password is required to read it)") from None
        raise DocumentError(f"document {p} is a corrupt PDF ({e})") from None


def _page(pdf, i: int, has_labels: bool) -> Page:
    import pypdfium2.raw as c

    page = pdf[i]
    tp = page.get_textpage()
    text = _clean(tp.get_text_range())
    tp.close()
    image_only = False
    if not text.strip():
        image_only = any(True for _ in page.get_objects(filter=[c.FPDF_PAGEOBJ_IMAGE], max_depth=2))
    page.close()
    label = pdf.get_page_label(i) if has_labels else ""
    if not label:
        found = sorted(printed_numbers(text), key=lambda t: (not t.isdigit(), t))
        label = found[0] if found else str(i + 1)
    return Page(i, label, text, image_only)


def _outline(pdf) -> list[Heading]:
    out = []
    for b in pdf.get_toc(max_depth=8):
        dest = b.get_dest()
        idx = dest.get_index() if dest is not None else None
        if idx is not None:
            out.append(Heading(int(b.level), b.get_title().strip(), int(idx)))
    return out


def load_pdf(path: str | Path, tables: bool = False, max_bytes: int = DEFAULT_MAX_BYTES, max_pages: int | None = None) -> PdfDoc:
    """Pages, labels, outline (and tables when asked) of the PDF at `path`."""
    p = Path(path)
    pdf = _open(p, max_bytes)
    try:
        n = len(pdf)
        if n == 0:
            raise DocumentError(f"document {p} is a PDF with no pages")
        if max_pages is not None and n > max_pages:
            raise DocumentError(f"document {p} has {n} pages, over the configured limit of {max_pages} (max_pages)")
        has_labels = any(pdf.get_page_label(i) for i in range(min(n, 3)))
        pages = [_page(pdf, i, has_labels) for i in range(n)]
        outline = _outline(pdf)
    finally:
        pdf.close()
    if not any(pg.text.strip() for pg in pages):
        scanned = sum(pg.image_only for pg in pages)
        what = f"image-only PDF ({scanned} of {n} pages are pictures with no text layer; OCR it first)" if scanned else "PDF with no text on any page"
        raise DocumentError(f"document {p} is an {what}" if scanned else f"document {p} is a {what}")
    doc = PdfDoc(p, pages, outline)
    if tables:
        doc.tables = extract_tables(p, n)
    return doc


def is_pdf(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix.lower() == ".pdf":
        return True
    try:
        with p.open("rb") as f:
            return f.read(5) == b"%PDF-"
    except OSError:
        return False
