"""split_by_structure: structure, budget and offsets."""

from __future__ import annotations

import pytest

from posttrain.errors import ConfigError
from posttrain.longctx.chunk import split_by_structure
from posttrain.longctx.synth import make_document
from posttrain.longctx.tokens import CharTokenizer

TOK = CharTokenizer()


class WordTok:
    """A tokenizer that is not character-level: one token per whitespace word."""

    def encode(self, text: str) -> list[int]:
        return [hash(w) % 1000 for w in text.split()]


def test_offsets_index_the_source_exactly():
    sd = make_document(1, 30_000, "markdown")
    for c in split_by_structure(sd.doc, 300, TOK):
        assert sd.doc[c.start : c.end] == c.text


def test_no_chunk_exceeds_budget_with_char_and_word_tokenizers():
    sd = make_document(2, 30_000, "numbered")
    for tok, budget in ((TOK, 200), (WordTok(), 25)):
        chunks = split_by_structure(sd.doc, budget, tok)
        assert max(len(tok.encode(c.text)) for c in chunks) <= budget


def test_markdown_headings_give_section_paths():
    doc = "# Manual\n\n## Install\nRun the installer.\n\n## Usage\nCall the tool.\n"
    chunks = split_by_structure(doc, 1000, TOK)
    assert [c.path for c in chunks] == [("Manual", "Install"), ("Manual", "Usage")]
    assert chunks[1].text == "## Usage\nCall the tool."


def test_numbered_sections_nest_and_list_items_do_not():
    doc = "1 Scope\nThis covers pumps.\n\n2 Terms\n2.1 Pump\n1. Turn it on.\nA pump moves water.\n"
    chunks = split_by_structure(doc, 1000, TOK)
    assert chunks[-1].path == ("2 Terms", "2.1 Pump")
    assert "1. Turn it on." in chunks[-1].text


def test_form_feed_and_page_markers_split_pages():
    doc = "First page text.\fSecond page text.\nPage 3\nThird page text.\n"
    chunks = split_by_structure(doc, 1000, TOK)
    assert [(c.page, c.text) for c in chunks] == [(1, "First page text."), (2, "Second page text."), (3, "Third page text.")]
    assert all(c.kind == "page" for c in chunks)


def test_table_is_kept_whole_when_it_fits():
    table = "| a | b |\n|---|---|\n" + "".join(f"| {i} | {i * i} |\n" for i in range(20))
    doc = "Intro sentence here.\n\n" + table + "\nAfter the table.\n"
    chunks = split_by_structure(doc, len(table) + 5, TOK)
    tables = [c for c in chunks if c.kind == "table"]
    assert len(tables) == 1 and tables[0].text == table.rstrip("\n")


def test_oversized_table_splits_between_rows():
    table = "| a | b |\n" + "".join(f"| {i} | {i * i} |\n" for i in range(40))
    chunks = split_by_structure(table, 60, TOK)
    assert len(chunks) > 1
    assert all(c.text.startswith("|") and c.text.endswith("|") for c in chunks)


def test_no_structure_falls_back_to_sentences_then_words():
    blob = " ".join(f"word{i} and more text here." for i in range(300))  # one paragraph, no breaks
    chunks = split_by_structure(blob, 100, TOK)
    assert len(chunks) > 10 and all(c.n_tokens <= 100 for c in chunks)
    assert all(c.text.endswith(".") for c in chunks[:-1])  # cut between sentences
    assert all(c.kind == "paragraph" for c in chunks)


def test_one_unbroken_token_run_is_cut_by_characters():
    chunks = split_by_structure("x" * 1000, 64, TOK)
    assert "".join(c.text for c in chunks) == "x" * 1000 and max(c.n_tokens for c in chunks) == 64


def test_empty_and_blank_documents_have_no_chunks():
    assert split_by_structure("", 100, TOK) == []
    assert split_by_structure(" \n\n\f \n", 100, TOK) == []


def test_bad_budget_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="max_tokens"):
        split_by_structure("text", 0, TOK)


def test_tokenizer_without_encode_is_rejected():
    with pytest.raises(TypeError, match="encode"):
        split_by_structure("text", 10, object())  # type: ignore[arg-type]
