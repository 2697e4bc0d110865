"""Claims that cite printed pages ("4417 [p. 68]"), checked against each cited page's text.

    checked = verify_page_claims(["4417 [p. 68]"], question, pdf)   # [PageCheck]
    checked[0].supported, checked[0].reason

A claim is supported when it cites at least one page, every cited label names a page of the
PDF, and each cited page's own extracted text supports the claim (`LexicalSupport` over the
page: the claim's numbers and terms, and the question's named entities, appear on it). One
cited page that does not hold the claim fails the claim: a citation is a statement about
where the evidence is, and a wrong one is not excused by a right one beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from posttrain.longctx.verify import LexicalSupport, Supporter
from posttrain.tasks.documents.pdf import PdfDoc
from posttrain.verifiers.page_cite import split_citations


@dataclass(frozen=True)
class PageCheck:
    claim: str
    pages: tuple[str, ...]
    supported: bool
    support: float  # the weakest cited page's support
    reason: str = ""


def verify_page_claims(claims: Sequence[str], question: str, pdf: PdfDoc, supporter: Supporter | None = None,
                       threshold: float = 0.6) -> list[PageCheck]:
    supporter = supporter or LexicalSupport()
    out = []
    for raw in claims:
        body, cited = split_citations(raw)
        if not cited:
            out.append(PageCheck(body, (), False, 0.0, "no page citation"))
            continue
        unknown = [c for c in cited if pdf.by_label(c) is None]
        if unknown:
            out.append(PageCheck(body, tuple(cited), False, 0.0, f"no page printed {', '.join(unknown)}"))
            continue
        scores = {c: supporter.support(body, pdf.page_text(pdf.by_label(c)), question) for c in cited}
        weak = [c for c, s in scores.items() if s < threshold]
        low = min(scores.values())
        out.append(PageCheck(body, tuple(cited), not weak, low, f"page {', '.join(weak)} does not hold the claim" if weak else ""))
    return out
