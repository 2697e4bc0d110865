"""Citations that point at pages: checked against the cited page's own text."""

from __future__ import annotations

from posttrain.longctx.index import DocIndex
from posttrain.longctx.oracle import OracleReader
from posttrain.longctx.page_verify import verify_page_claims
from posttrain.longctx.pdf_chunk import split_pdf
from posttrain.longctx.reader import Citation, Claim
from posttrain.longctx.tokens import CharTokenizer
from posttrain.longctx.verify import verify
from posttrain.tasks.documents.pdf import load_pdf
from tests.unit.documents.pdfs import text_pdf

PAGES = ["Front matter", "Preface", "The access code of vault Orion is 4417.", "The access code of vault Lyra is 9921."]


def _pdf(tmp_path):
    return load_pdf(text_pdf(tmp_path / "v.pdf", PAGES, roman_front=2))  # labels i, ii, 1, 2


def test_a_claim_citing_the_page_that_holds_it_is_supported(tmp_path):
    [c] = verify_page_claims(["4417 [p. 1]"], "What is the access code of vault Orion?", _pdf(tmp_path))
    assert c.supported and c.pages == ("1",)


def test_a_citation_to_a_page_that_does_not_hold_the_claim_fails(tmp_path):
    [c] = verify_page_claims(["4417 [p. 2]"], "What is the access code of vault Orion?", _pdf(tmp_path))
    assert not c.supported and "page 2 does not hold" in c.reason


def test_one_wrong_page_among_right_ones_fails_the_claim(tmp_path):
    [c] = verify_page_claims(["4417 [p. 1] [p. 2]"], "What is the access code of vault Orion?", _pdf(tmp_path))
    assert not c.supported


def test_a_physical_page_number_is_not_the_printed_one(tmp_path):
    [c] = verify_page_claims(["4417 [p. 3]"], "What is the access code of vault Orion?", _pdf(tmp_path))
    assert not c.supported and "no page printed 3" in c.reason


def test_offset_citations_naming_the_wrong_page_are_removed(tmp_path):
    pdf = _pdf(tmp_path)
    chunks = split_pdf(pdf, 200, CharTokenizer())
    idx = DocIndex.build(chunks, OracleReader({}))
    home = next(c for c in chunks if "4417" in c.text)
    s = pdf.text.index("The access code of vault Orion")
    e = pdf.text.index("4417") + 4
    q = "What is the access code of vault Orion?"
    right = verify([Claim("4417", (Citation(home.id, s, e, page="1"),))], q, pdf.text, idx)
    wrong = verify([Claim("4417", (Citation(home.id, s, e, page="2"),))], q, pdf.text, idx)
    assert right.found and not wrong.found and "is on page 1" in wrong.removed[0].reason


def test_ranking_follows_a_question_that_names_a_printed_page(tmp_path):
    from posttrain.longctx.rank import page_refs, rank

    pdf = load_pdf(text_pdf(tmp_path / "r.pdf", ["Arrays are everywhere here."] * 3 + ["Arrays: the real section."], roman_front=1))
    chunks = split_pdf(pdf, 200, CharTokenizer())
    idx = DocIndex.build(chunks, OracleReader({}))
    assert page_refs("see [Arrays], page 3 and p. iv") == {"3", "iv"}
    assert rank(idx, "Follow [Arrays], page 3", top_k=1)[0].chunk.label == "3"
