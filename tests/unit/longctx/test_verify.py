"""verify: every citation is checked against the source; unsupported claims go."""

from __future__ import annotations

from posttrain.longctx.chunk import split_by_structure
from posttrain.longctx.index import DocIndex
from posttrain.longctx.oracle import OracleReader
from posttrain.longctx.reader import Citation, Claim
from posttrain.longctx.tokens import CharTokenizer
from posttrain.longctx.verify import NOT_FOUND, LexicalSupport, question_entities, verify

DOC = (
    "# Vaults\n\n## Vault Orion\nThe access code of Orion is 4417. The guard is Bob.\n\n"
    "## Vault Lyra\nThe access code of Lyra is 9921. The guard is Ann.\n"
)
Q = "What is the access code of Orion?"
CHUNKS = split_by_structure(DOC, 200, CharTokenizer())
INDEX = DocIndex.build(CHUNKS, OracleReader())


def span(text: str) -> tuple[str, int, int]:
    s = DOC.index(text)
    chunk = next(c for c in CHUNKS if c.start <= s < c.end)
    return chunk.id, s, s + len(text)


def test_supported_claim_is_kept_with_full_confidence():
    v = verify([Claim("4417", (Citation(*span("The access code of Orion is 4417.")),))], Q, DOC, INDEX)
    assert v.found and v.answer == "4417" and v.confidence == 1.0 and not v.removed


def test_value_absent_from_cited_span_is_removed():
    v = verify([Claim("4417", (Citation(*span("The guard is Bob.")),))], Q, DOC, INDEX)
    assert not v.found and v.answer == NOT_FOUND and "does not support" in v.removed[0].reason


def test_near_miss_span_about_another_entity_is_removed():
    v = verify([Claim("9921", (Citation(*span("The access code of Lyra is 9921.")),))], Q, DOC, INDEX)
    assert v.answer == NOT_FOUND


def test_out_of_range_and_unknown_chunk_citations_are_removed():
    cid, s, e = span("The access code of Orion is 4417.")
    bad = [Claim("4417", (Citation(cid, s, len(DOC) + 5),)), Claim("4417", (Citation("c99", s, e),))]
    v = verify(bad, Q, DOC, INDEX)
    assert not v.claims and "outside the document" in v.removed[0].reason and "unknown chunk" in v.removed[1].reason


def test_citation_outside_its_chunk_is_removed():
    _, s, e = span("The access code of Orion is 4417.")
    other = next(c for c in CHUNKS if not c.start <= s < c.end)
    v = verify([Claim("4417", (Citation(other.id, s, e),))], Q, DOC, INDEX)
    assert "outside chunk" in v.removed[0].reason


def test_claim_without_citation_is_removed_in_citation_required_mode():
    v = verify([Claim("4417")], Q, DOC, INDEX)
    assert v.answer == NOT_FOUND and "no citation" in v.removed[0].reason


def test_flag_only_keeps_unsupported_claims_but_still_answers_not_found():
    v = verify([Claim("1234", (Citation(*span("The guard is Bob.")),))], Q, DOC, INDEX, flag_only=True)
    assert v.answer == NOT_FOUND and v.claims[0].reason and not v.removed


def test_question_entities_skip_the_first_word():
    assert question_entities('Where is "blue whale" Orion in 2021?') == {"blue", "whale", "orion", "2021"}


def test_lexical_support_needs_every_number():
    assert LexicalSupport().support("4417 and 12", "code 4417", "code?") == 0.0
