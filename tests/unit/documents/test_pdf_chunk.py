"""PDF chunks: never across pages, each with its printed label and its outline path."""

from __future__ import annotations

from typer.testing import CliRunner

from posttrain.cli.main import app
from posttrain.longctx.pdf_chunk import split_pdf
from posttrain.longctx.tokens import CharTokenizer
from posttrain.tasks.documents.pdf import load_pdf
from tests.unit.documents.pdfs import r_manual_or_skip, text_pdf


def test_chunk_offsets_index_the_joined_text_and_stay_on_one_page(tmp_path):
    pdf = load_pdf(text_pdf(tmp_path / "t.pdf", ["one\n" * 30, "two\n" * 30, "three\n" * 30], roman_front=1))
    chunks = split_pdf(pdf, 40, CharTokenizer())
    assert all(pdf.text[c.start : c.end] == c.text and c.n_tokens <= 40 for c in chunks)
    assert all(pdf.starts[c.page - 1] <= c.start and c.end <= pdf.ends[c.page - 1] for c in chunks)
    assert {c.label for c in chunks} == {"i", "1", "2"}


def test_r_intro_chunks_carry_outline_paths():
    pdf = load_pdf(r_manual_or_skip("R-intro"))
    chunks = split_pdf(pdf, 1500, CharTokenizer())
    graphics = [c for c in chunks if c.label == "68"]
    assert graphics and graphics[-1].path[0] == "12 Graphical procedures"


def test_cli_chunk_of_a_pdf_prints_page_labels(tmp_path):
    path = text_pdf(tmp_path / "t.pdf", ["front", "body"], roman_front=1)
    r = CliRunner().invoke(app, ["longctx", "chunk", str(path), "--max-tokens", "50"])
    assert r.exit_code == 0 and "p1(i)" in r.output and "p2(1)" in r.output


def test_cli_ask_reads_a_pdf_and_reports_pages_of_its_citations(tmp_path):
    import json

    from posttrain.models.io import save_policy
    from posttrain.models.tiny import build_tiny

    tiny = save_policy(*build_tiny(seed=0), tmp_path / "tiny")
    path = text_pdf(tmp_path / "d.pdf", ["Front", "The access code of Orion is 4417.", "The access code of Lyra is 9921."], roman_front=1)
    r = CliRunner().invoke(app, ["longctx", "ask", str(path), "-q", "What is the access code of Orion?", "--model", str(tiny),
                                 "--engine", "hf", "--top-k", "1", "--json"])
    out = json.loads(r.output.strip().splitlines()[-1])
    assert r.exit_code == 0 and out["cost"]["doc_tokens"] > 0
    assert all(c["page_label"] in {"i", "1", "2"} and out["answer"] in c["quote"] for c in out["citations"])
