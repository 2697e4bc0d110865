"""Small real PDFs for the tests, drawn with reportlab: labelled pages, offsets, scans, encryption."""

from __future__ import annotations

from pathlib import Path

import pytest


def text_pdf(path: Path, pages: list[str], footer_offset: int | None = None, roman_front: int = 0, encrypt: str | None = None) -> Path:
    """One text page per entry. `footer_offset`: print `index + 1 - offset` at the page foot (no
    /PageLabels). `roman_front`: the PDF labels its first pages i, ii, ... then 1, 2, ..."""
    from reportlab.pdfgen import canvas

    kw = {}
    if encrypt:
        from reportlab.lib.pdfencrypt import StandardEncryption

        kw["encrypt"] = StandardEncryption(encrypt, ownerPassword=encrypt + "-owner")
    c = canvas.Canvas(str(path), invariant=1, **kw)
    if roman_front:
        c.addPageLabel(0, style="ROMAN_LOWER")
        c.addPageLabel(roman_front, style="ARABIC", start=1)
    for i, body in enumerate(pages):
        y = 800
        for line in body.splitlines():
            c.drawString(72, y, line)
            y -= 14
        if footer_offset is not None:
            c.drawString(300, 30, str(i + 1 - footer_offset))
        c.showPage()
    c.save()
    return path


def scanned_pdf(path: Path, text_pages: list[str], scanned_at: set[int], n: int) -> Path:
    """n pages; those in `scanned_at` carry only a picture (no text layer)."""
    from PIL import Image
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    img = ImageReader(Image.new("RGB", (64, 32), (200, 30, 30)))
    c = canvas.Canvas(str(path), invariant=1)
    for i in range(n):
        if i in scanned_at:
            c.drawImage(img, 72, 500, 256, 128)
        else:
            c.drawString(72, 800, text_pages[i % len(text_pages)] if text_pages else "text")
        c.showPage()
    c.save()
    return path


def r_manual_or_skip(name: str) -> Path:
    from posttrain.tasks.documents.rdocs import RDocsUnavailable, r_manual

    try:
        return r_manual(name)
    except RDocsUnavailable as e:  # only when apt-get / dpkg-deb are missing here
        pytest.skip(f"R manuals unavailable: {e}")
