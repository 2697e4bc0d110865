"""The document domains' checkers against honest, wrong and hostile answers."""

from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from posttrain.tasks.documents.table_extract import TableExtract
from posttrain.types import Task, Trajectory, Turn
from tests.unit.documents.pdfs import r_manual_or_skip


def _score(task: Task, texts: list[str]) -> list[float]:
    from posttrain.verifiers.run import VerifierRunner

    trajs = [Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", x),) if x else (), sample=i,
                        finish_reason="stop") for i, x in enumerate(texts)]
    out = asyncio.run(VerifierRunner(None).verify_all({task.id: task}, trajs))
    return [x.verify.score for x in out]


@pytest.fixture(scope="module")
def xref_tasks():
    r_manual_or_skip("R-intro")
    from posttrain.tasks.documents.xref import XRef

    return XRef().generate(6, seed=3)


@pytest.fixture(scope="module")
def table_tasks():
    return TableExtract().generate(4, seed=5)


def test_xref_oracles_score_one(xref_tasks):
    assert all(_score(t, [t.oracle]) == [1.0] for t in xref_tasks)


def test_xref_mixes_following_references_and_locating_pages(xref_tasks):
    assert {t.metadata["kind"] for t in xref_tasks} == {"follow", "locate"}


def test_xref_answer_citing_every_shown_page_scores_zero(xref_tasks):
    for t in xref_tasks:
        body = t.oracle.rsplit(" [p.", 1)[0]
        assert _score(t, [body + " " + " ".join(f"[p. {x}]" for x in t.metadata["shown_labels"])]) == [0.0]


def test_xref_copying_the_whole_page_scores_zero(xref_tasks):
    for t in xref_tasks:
        label = t.verifier.args["evidence"][0]
        assert _score(t, [t.verifier.args["pages"][label] + f" [p. {label}]"]) == [0.0]


def test_xref_citation_to_a_page_that_does_not_hold_the_answer_fails(xref_tasks):
    for t in xref_tasks:
        label = t.verifier.args["evidence"][0]
        other = next(x for x in t.metadata["shown_labels"] if x != label)
        assert _score(t, [t.oracle.replace(f"[p. {label}]", f"[p. {other}]")]) == [0.0]


def test_xref_printed_page_not_sheet_number_is_the_answer(xref_tasks):
    locate = [t for t in xref_tasks if t.metadata["kind"] == "locate"]
    for t in locate:
        sheet, label = t.metadata["target_sheet"], t.verifier.args["evidence"][0]
        if str(sheet) != label:
            assert _score(t, [f"{sheet} [p. {label}]"]) == [0.0]


def test_table_oracles_score_one_and_some_tables_break_across_pages(table_tasks):
    assert all(_score(t, [t.oracle]) == [1.0] for t in table_tasks)
    assert any(t.metadata["split"] for t in table_tasks)


def test_a_schema_valid_empty_table_scores_zero(table_tasks):
    for t in table_tasks:
        header = json.loads(t.oracle)["header"]  # even with the right header copied from the prompt
        assert _score(t, [json.dumps({"header": [], "rows": []}), json.dumps({"header": header, "rows": []})]) == [0.0, 0.0]


def test_a_table_missing_the_rows_after_a_page_break_does_not_pass(table_tasks):
    t = next(t for t in table_tasks if t.metadata["split"])
    want = json.loads(t.oracle)
    score = _score(t, [json.dumps({"header": want["header"], "rows": want["rows"][: len(want["rows"]) // 2]})])[0]
    assert 0.0 < score < 0.6


def test_a_repeated_header_kept_as_a_row_costs_score(table_tasks):
    t = next(t for t in table_tasks if t.metadata["split"])
    want = json.loads(t.oracle)
    rows = want["rows"][:5] + [want["header"]] + want["rows"][5:]
    assert _score(t, [json.dumps({"header": want["header"], "rows": rows})])[0] < 1.0


def test_the_table_prompt_holds_the_cells_it_asks_for(table_tasks):
    for t in table_tasks:
        cells = [c for r in json.loads(t.oracle)["rows"] for c in r]
        text = re.sub(r"\s+", " ", t.prompt[0].content)
        assert all(c in text for c in cells)


def test_wrong_answers_never_pass(table_tasks, xref_tasks):
    for dom, tasks in ((TableExtract(), table_tasks), (None, xref_tasks)):
        from posttrain.tasks.documents.xref import XRef

        dom = dom or XRef()
        for t in tasks:
            assert _score(t, [dom.wrong_answer(t, random.Random(t.id))])[0] < 1.0


@pytest.fixture(scope="module")
def niah_tasks():
    from posttrain.tasks.documents.niah import Niah

    return Niah(lengths=(600, 1200)).generate(10, seed=1)


def test_niah_oracles_score_one_at_every_length_and_depth(niah_tasks):
    assert all(_score(t, [t.oracle]) == [1.0] for t in niah_tasks)
    assert {t.metadata["length_tokens"] for t in niah_tasks} == {600, 1200} and len({t.metadata["depth"] for t in niah_tasks}) >= 4


def test_niah_haystacks_are_ruler_essays_and_fit_the_length(niah_tasks):
    essay = [t for t in niah_tasks if t.metadata["variant"] == "single_essay"]
    assert essay and all(len(t.prompt[0].content.split()) <= t.metadata["length_tokens"] for t in niah_tasks)
    assert all("special magic number" in t.prompt[0].content for t in essay)


def test_niah_listing_every_number_in_the_haystack_never_passes(niah_tasks):
    multikey = [t for t in niah_tasks if t.metadata["variant"] == "multikey"]
    assert multikey
    for t in niah_tasks:
        if t.verifier.args["kind"] == "numbers":
            every = " ".join(re.findall(r"\b\d{7}\b", t.prompt[0].content) + ["1234567"])
            assert _score(t, [every])[0] <= (0.25 if t in multikey else 0.8)


def test_niah_generation_is_seeded(niah_tasks):
    from posttrain.tasks.documents.niah import Niah

    again = Niah(lengths=(600, 1200)).generate(10, seed=1)
    assert [t.version for t in again] == [t.version for t in niah_tasks]


def test_offline_sentence_splitter_splits_after_full_stops():
    from posttrain.tasks.documents.niah import split_sentences

    assert split_sentences("The sky is blue. It rains. 3 cats ran!") == ["The sky is blue.", "It rains.", "3 cats ran!"]


@pytest.fixture(scope="module")
def report_tasks():
    from posttrain.tasks.documents.report_qa import ReportQA

    return ReportQA().generate(12, seed=2)


def test_report_qa_oracles_score_one_and_other_answers_zero(report_tasks):
    from posttrain.tasks.documents.report_qa import ReportQA

    for t in report_tasks:
        assert _score(t, [t.oracle, ReportQA().wrong_answer(t, random.Random(0))]) == [1.0, 0.0]


def test_report_qa_numbers_match_within_one_percent_not_beyond():
    from posttrain.tasks.documents.report_qa import rows

    row = next(r for r in rows() if r[2] == "$55.2 million")
    from posttrain.types import Limits, Message, Spec

    t = Task(id="r", domain="report_qa", prompt=(Message("user", "q"),), verifier=Spec("report_answer", {"answer": row[2], "kind": "numeric"}),
             limits=Limits(max_steps=1))
    assert _score(t, ["About $55.3 million", "$57 million", "55.2 and 12 and 13"]) == [1.0, 0.0, 0.0]


def test_report_qa_copying_the_documents_scores_zero(report_tasks):
    for t in report_tasks[:3]:
        assert _score(t, [t.prompt[0].content[:5000] + " " + t.oracle]) == [0.0]
