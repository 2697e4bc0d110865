"""Index and ranking: hybrid top-k, document-order merge, no gold leakage."""

from __future__ import annotations

from posttrain.longctx import CharTokenizer, Gold, LongDoc, OracleReader
from posttrain.longctx.chunk import split_by_structure
from posttrain.longctx.index import DocIndex
from posttrain.longctx.rank import merge, rank
from posttrain.longctx.synth import make_document

SD = make_document(11, 30_000, "numbered")


def test_gold_chunk_ranks_first_for_a_named_question():
    q = next(q for q in SD.qa if q.answer)
    ld = LongDoc(SD.doc, OracleReader(), CharTokenizer(), max_tokens=400)
    top = ld.ask(q.question, top_k=1).ranked[0].chunk
    assert top.start <= q.start and q.end <= top.end


def test_ranking_does_not_depend_on_the_oracle_gold():
    q = SD.qa[0]
    blind = LongDoc(SD.doc, OracleReader(), CharTokenizer(), max_tokens=400).ask(q.question)
    told = LongDoc(SD.doc, OracleReader({q.question: Gold(q.answer, q.start, q.end)}), CharTokenizer(), max_tokens=400).ask(q.question)
    assert [r.chunk.id for r in blind.ranked] == [r.chunk.id for r in told.ranked]


def test_merge_is_in_document_order_without_duplicates():
    idx = DocIndex.build(split_by_structure(SD.doc, 400, CharTokenizer()), OracleReader())
    ranked = rank(idx, SD.qa[0].question, top_k=5)
    merged = merge(ranked + ranked)
    assert len(merged) == 5 and [c.start for c in merged] == sorted(c.start for c in merged)


def test_document_without_any_words_ranks_without_crashing():
    idx = DocIndex.build(split_by_structure("... --- !!! ???\n\n*** ###", 50, CharTokenizer()), OracleReader())
    assert all(r.score == 0.0 for r in rank(idx, "What is it?", top_k=3))


def test_empty_index_ranks_nothing():
    assert rank(DocIndex.build([], OracleReader()), "anything?", top_k=5) == []
