"""Reading a document from disk, with clear errors for input that is not text.

    doc = load_document("report.md")   # str; raises DocumentError naming the file

Accepted: UTF-8 text (a BOM is dropped; \\r\\n becomes \\n so offsets match what the
chunker sees). Rejected with a one-line error: a missing path, a directory, an empty or
whitespace-only file, and binary content (a NUL byte in the first 8 KiB, or bytes that
are not UTF-8). Limits: other text encodings (Latin-1, UTF-16) are treated as binary.
"""

from __future__ import annotations

from pathlib import Path

from posttrain.tasks.documents.pdf import DocumentError  # one error type for text and PDF input

__all__ = ["DocumentError", "check_text", "load_document"]


def check_text(doc: str, name: str = "document") -> str:
    if not doc.strip():
        raise DocumentError(f"{name} is empty: nothing to index")
    return doc


def load_document(path: str | Path, max_bytes: int | None = None) -> str:
    p = Path(path)
    if not p.exists():
        raise DocumentError(f"document not found: {p}")
    if not p.is_file():
        raise DocumentError(f"document is not a regular file: {p}")
    size = p.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise DocumentError(f"document {p} is {size} bytes, over the configured limit of {max_bytes} (max_bytes)")
    data = p.read_bytes()
    if data.startswith(b"%PDF-"):
        raise DocumentError(f"document {p} is a PDF: read it with posttrain.tasks.documents.pdf.load_pdf (the CLI does)")
    if b"\x00" in data[:8192]:
        raise DocumentError(f"document looks binary (NUL bytes): {p}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocumentError(f"document is not UTF-8 text (bad byte at offset {e.start}): {p}") from None
    return check_text(text.replace("\r\n", "\n"), f"document {p}")
