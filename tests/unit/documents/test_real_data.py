"""`make-data --real`: training data from the real documents, written as tasks and SFT rows."""

from __future__ import annotations

import json

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
