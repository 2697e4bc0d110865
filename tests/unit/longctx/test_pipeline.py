"""LongDoc.ask end to end with the oracle reader, and bad documents."""

from __future__ import annotations

import pytest

from posttrain.longctx import CharTokenizer, Gold, LongDoc, OracleReader, SummaryCache
from posttrain.longctx.document import DocumentError, load_document
from posttrain.longctx.synth import make_document

SD = make_document(7, 40_000, "markdown")
GOLD = {q.question: Gold(q.answer, q.start, q.end) for q in SD.qa}


def longdoc(noise: float = 0.0, cache: SummaryCache | None = None) -> LongDoc:
    return LongDoc(SD.doc, OracleReader(GOLD, noise=noise), CharTokenizer(), max_tokens=512, cache=cache)


def test_answers_with_a_citation_inside_the_gold_span():
    q = next(q for q in SD.qa if q.answer)
    res = longdoc().ask(q.question)
    cite = res.verified.claims[0].citations[0]
    assert res.answer == q.answer and q.start <= cite.start and cite.end <= q.end


def test_answer_not_in_document_is_not_found_even_when_the_reader_guesses():
    q = next(q for q in SD.qa if q.answer is None)
    res = longdoc(noise=1.0).ask(q.question)  # noise 1: the oracle always guesses a cited value
    assert res.draft and res.answer == "not found" and not res.found


def test_reader_reads_only_the_top_k_chunks():
    q = SD.qa[0]
    res = longdoc().ask(q.question, top_k=5)
    assert len(res.context) <= 5 and res.cost.read_tokens == sum(c.n_tokens for c in res.context)
    assert res.cost.read_fraction < 0.15


def test_index_is_built_once_then_served_from_the_cache():
    cache = SummaryCache()
    ld = longdoc(cache=cache)
    first, second = ld.ask(SD.qa[0].question), ld.ask(SD.qa[1].question)
    assert first.cost.cache_misses == len(ld.chunks) and first.cost.index_tokens > 0
    assert second.cost.cache_misses == 0 and second.cost.index_tokens == 0
    again = longdoc(cache=cache).ask(SD.qa[0].question)  # a new LongDoc, same cache: all hits
    assert again.cost.cache_hits == len(ld.chunks) and again.cost.cache_misses == 0


def test_summary_cache_persists_to_disk(tmp_path):
    path = tmp_path / "summaries.json"
    cache = SummaryCache(path)
    longdoc(cache=cache).ask(SD.qa[0].question)
    cache.save()
    res = longdoc(cache=SummaryCache(path)).ask(SD.qa[0].question)
    assert res.cost.cache_misses == 0


def test_document_without_structure_still_answers():
    doc = " ".join(f"Filler sentence number {i} about nothing." for i in range(400))
    doc += " The vault code of Zorvan is 55123. " + " ".join(f"More filler {i}." for i in range(400))
    s = doc.index("The vault code")
    q = "What is the vault code of Zorvan?"
    reader = OracleReader({q: Gold("55123", s, s + len("The vault code of Zorvan is 55123."))})
    assert LongDoc(doc, reader, CharTokenizer(), max_tokens=256).ask(q).answer == "55123"


def test_empty_document_has_nothing_to_read_and_answers_not_found():
    res = LongDoc("", OracleReader(), CharTokenizer(), max_tokens=64).ask("What is it?")
    assert res.answer == "not found" and res.cost.read_tokens == 0


@pytest.mark.parametrize(
    "content, message",
    [(b"", "empty"), (b"  \n\n", "empty"), (b"\x89PNG\r\n\x1a\n\x00\x00", "binary"), (b"caf\xe9 au lait", "not UTF-8")],
)
def test_bad_files_get_one_line_errors_naming_the_file(tmp_path, content, message):
    p = tmp_path / "doc.bin"
    p.write_bytes(content)
    with pytest.raises(DocumentError, match=message) as e:
        load_document(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DocumentError, match="not found"):
        load_document(tmp_path / "nope.md")
