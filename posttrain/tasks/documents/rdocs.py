"""The R manuals of Debian's `r-doc-pdf` (GPL): real PDFs with outlines, page labels and
cross-page references ("see Chapter 12 [Graphics], page 68").

    path = r_manual("R-intro")        # fetched once into the cache with apt-get download + dpkg-deb -x
    names = MANUALS                   # R-intro, R-lang, R-data, R-admin, R-FAQ, R-ints, R-exts, refman

The cache is `$POSTTRAIN_RDOC_DIR`, else `~/.cache/posttrain/r-doc-pdf`; `make rdocs` (run
by `make test`) fills it. Fetching needs only `apt-get download` (no root, no install) and
`dpkg-deb`; without them `RDocsUnavailable` says which is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from posttrain.tasks.documents.pdf import DocumentError

MANUALS = ("R-intro", "R-lang", "R-data", "R-admin", "R-FAQ", "R-ints", "R-exts", "refman")
PACKAGE = "r-doc-pdf"


class RDocsUnavailable(DocumentError):
    """The R manuals are not cached and cannot be fetched here (no apt-get / dpkg-deb)."""


def cache_dir() -> Path:
    return Path(os.environ.get("POSTTRAIN_RDOC_DIR") or Path.home() / ".cache" / "posttrain" / "r-doc-pdf")


def fetch(dest: Path | None = None) -> Path:
    """Download r-doc-pdf with apt and unpack its manuals into `dest` (the cache by default)."""
    dest = dest or cache_dir()
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise RDocsUnavailable(f"{PACKAGE} is not cached in {dest} and `{tool}` is not available to fetch it")
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(["apt-get", "download", PACKAGE], cwd=tmp, capture_output=True, text=True, timeout=300)
        debs = list(Path(tmp).glob(f"{PACKAGE}_*.deb"))
        if not debs:
            why = (got.stderr or got.stdout).strip().splitlines()[-1:] or ["no .deb"]
            raise RDocsUnavailable(f"apt-get download {PACKAGE} failed: {why[0]}")
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(Path(tmp) / "x")], check=True, timeout=300)
        # The package holds manual/R-intro.pdf twice: the file (usr/share/R/doc/manual) and a symlink to it
        # (usr/share/doc/r-doc-pdf/manual); rglob's order is the file system's, so take the real one.
        found = [p for p in (Path(tmp) / "x").rglob("manual/R-intro.pdf") if not p.is_symlink()]
        if not found:
            raise RDocsUnavailable(f"{debs[0].name} holds no manual/R-intro.pdf")
        dest.mkdir(parents=True, exist_ok=True)
        for pdf in found[0].parent.glob("*.pdf"):
            if not pdf.is_symlink():
                shutil.copyfile(pdf, dest / pdf.name)
    missing = [m for m in MANUALS if not (dest / f"{m}.pdf").is_file()]
    if missing:
        raise RDocsUnavailable(f"{PACKAGE} unpacked, but {dest} lacks {', '.join(missing)}")
    return dest


def r_manual(name: str) -> Path:
    """The cached PDF of manual `name`, fetching the package first when it is missing."""
    if name not in MANUALS:
        raise DocumentError(f"unknown R manual {name!r}; known: {', '.join(MANUALS)}")
    path = cache_dir() / f"{name}.pdf"
    if not path.is_file():
        fetch()
    return path


if __name__ == "__main__":  # `python -m posttrain.tasks.documents.rdocs`: fill the cache (make rdocs)
    print(fetch())
