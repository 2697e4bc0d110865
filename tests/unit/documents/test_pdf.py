"""PDF ingestion: page text, printed labels, outline, tables merged across pages, bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from posttrain.cli.main import app
from posttrain.tasks.documents.pdf import DocumentError, load_pdf, printed_numbers
from posttrain.tasks.documents.report_pdf import build_report
from tests.unit.documents.pdfs import r_manual_or_skip, scanned_pdf, text_pdf


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("rep") / "report.pdf"
    return path, build_report(path, seed=0)


def test_every_generated_table_is_extracted_cell_for_cell(report):
    path, rep = report
    got = load_pdf(path, tables=True).tables
    assert [(t.header, t.rows) for t in got] == [(t.header, t.rows) for t in rep.tables]


def test_tables_that_break_across_pages_come_back_as_one_table(report):
    path, rep = report
    got = load_pdf(path, tables=True).tables
    long = [g for g, t in zip(got, rep.tables) if t.long]
    assert long and all(len(t.pages) >= 2 for t in long)


def test_tables_are_not_read_unless_asked(report):
    assert load_pdf(report[0]).tables == []


def test_pdf_page_labels_are_read_when_the_file_has_them(tmp_path):
    pdf = load_pdf(text_pdf(tmp_path / "l.pdf", ["front", "more front", "body one", "body two"], roman_front=2))
    assert [p.label for p in pdf.pages] == ["i", "ii", "1", "2"]


def test_without_labels_the_printed_number_is_the_label(tmp_path):
    pdf = load_pdf(text_pdf(tmp_path / "o.pdf", ["a", "b", "c", "d"], footer_offset=2))
    assert [p.label for p in pdf.pages[2:]] == ["1", "2"]


def test_page_texts_sit_at_their_offsets_in_the_joined_text(tmp_path):
    pdf = load_pdf(text_pdf(tmp_path / "t.pdf", ["alpha line", "beta line", "gamma line"]))
    assert [pdf.page_text(i).strip() for i in range(3)] == ["alpha line", "beta line", "gamma line"]
    assert pdf.page_at(pdf.text.index("gamma")) == 2


def test_r_intro_labels_match_the_printed_numbers_on_every_numbered_page():
    pdf = load_pdf(r_manual_or_skip("R-intro"))
    numbered = [p for p in pdf.pages if printed_numbers(p.text)]
    assert len(numbered) >= len(pdf.pages) - 2  # only the title pages carry no number
    assert all(p.label in printed_numbers(p.text) for p in numbered)
    assert pdf.pages[6].label == "1" and pdf.by_label("68") == 73  # printed numbers are offset from the index


def test_r_intro_outline_becomes_headings_with_their_pages():
    pdf = load_pdf(r_manual_or_skip("R-intro"))
    titles = {h.title: h.page for h in pdf.outline}
    assert pdf.pages[titles["12 Graphical procedures"]].label == "68"


def test_an_encrypted_pdf_is_one_line_naming_the_file(tmp_path):
    path = text_pdf(tmp_path / "secret.pdf", ["hidden"], encrypt="pw")
    with pytest.raises(DocumentError, match=r"secret\.pdf is an encrypted PDF"):
        load_pdf(path)


def test_a_truncated_pdf_is_reported_corrupt(tmp_path, report):
    bad = tmp_path / "cut.pdf"
    bad.write_bytes(report[0].read_bytes()[:2000])
    with pytest.raises(DocumentError, match=r"cut\.pdf is a corrupt PDF"):
        load_pdf(bad)


def test_an_image_only_pdf_is_refused_as_needing_ocr(tmp_path):
    with pytest.raises(DocumentError, match=r"scan\.pdf is an image-only PDF \(2 of 2 pages"):
        load_pdf(scanned_pdf(tmp_path / "scan.pdf", [], {0, 1}, 2))


def test_one_scanned_page_in_a_text_pdf_is_reported_not_read_as_blank(tmp_path):
    pdf = load_pdf(scanned_pdf(tmp_path / "mixed.pdf", ["words here"], {1}, 3))
    assert pdf.image_only == [1] and pdf.pages[0].text.strip() == "words here"


def test_a_document_over_the_size_limit_is_refused_before_reading(tmp_path, report):
    with pytest.raises(DocumentError, match=r"over the configured limit of 100"):
        load_pdf(report[0], max_bytes=100)


def test_a_file_that_is_not_a_pdf_is_named(tmp_path):
    p = tmp_path / "x.pdf"
    p.write_text("hello")
    with pytest.raises(DocumentError, match=r"x\.pdf is not a PDF"):
        load_pdf(p)


def test_cli_ingest_reports_tables_and_labels_as_json(report):
    r = CliRunner().invoke(app, ["longctx", "ingest", str(report[0]), "--tables", "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 0 and len(out["tables"]) == len(report[1].tables) and out["labels"][0] == "1"


def test_cli_ingest_reports_a_scanned_page(tmp_path):
    r = CliRunner().invoke(app, ["longctx", "ingest", str(scanned_pdf(tmp_path / "m.pdf", ["text"], {2}, 3))])
    assert r.exit_code == 0 and "page 3 (3) is image-only" in r.output
