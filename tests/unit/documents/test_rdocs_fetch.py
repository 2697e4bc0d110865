"""`make rdocs` fills the cache with every R manual, whatever order the file system lists the package in.

r-doc-pdf holds each manual twice (the file, and a symlink to it under usr/share/doc); a fetch that
took whichever directory rglob met first copied nothing on some machines and still exited 0, so the
document tests failed later with "document not found". Now the fetch either fills every manual or raises.
"""

from __future__ import annotations

import shutil

import pytest

from posttrain.tasks.documents.rdocs import MANUALS, RDocsUnavailable, fetch


def test_fetch_unpacks_every_manual_as_a_real_file(tmp_path):
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("apt-get / dpkg-deb not available: the R manuals cannot be fetched here")
    try:
        dest = fetch(tmp_path / "r-doc-pdf")
    except RDocsUnavailable as e:
        pytest.skip(f"r-doc-pdf cannot be downloaded here: {e}")
    for name in MANUALS:
        pdf = dest / f"{name}.pdf"
        assert pdf.is_file() and not pdf.is_symlink() and pdf.read_bytes()[:5] == b"%PDF-", name
