"""`posttrain longctx` commands on the real (untrained) tiny model and real files."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from posttrain.cli.main import app
from posttrain.longctx.document import DocumentError

DOC = "# Depot\n\n## Orion\nThe access code of Orion is 4417. Bob guards it.\n\n## Lyra\nThe access code of Lyra is 9921.\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from posttrain.models.io import save_policy
    from posttrain.models.tiny import build_tiny

    return save_policy(*build_tiny(seed=0), tmp_path_factory.mktemp("tiny"))


@pytest.mark.slow  # ~3 s CPU: loads and runs the real tiny model
def test_ask_json_reports_answer_and_cost_with_a_real_model(tiny, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    r = CliRunner().invoke(app, ["longctx", "ask", str(doc), "-q", "What is the access code of Orion?", "--model", str(tiny), "--engine", "hf", "--top-k", "1", "--json"])
    out = json.loads(r.output.strip().splitlines()[-1])
    assert r.exit_code == 0 and out["cost"]["doc_tokens"] > 0 and 0 < out["cost"]["read_tokens"] <= out["cost"]["doc_tokens"]
    assert all(out["answer"] in c["quote"] for c in out["citations"])  # whatever it says, it is grounded or "not found"


def test_ask_on_a_binary_file_raises_a_document_error(tiny, tmp_path):
    doc = tmp_path / "img.png"
    doc.write_bytes(b"\x89PNG\x00\x00\x00")
    r = CliRunner().invoke(app, ["longctx", "ask", str(doc), "-q", "x?", "--model", str(tiny), "--engine", "hf"])
    assert isinstance(r.exception, DocumentError) and "binary" in str(r.exception)


def test_chunk_command_lists_sections(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    r = CliRunner().invoke(app, ["longctx", "chunk", str(doc), "--max-tokens", "200"])
    assert r.exit_code == 0 and "Depot > Orion" in r.output and "Depot > Lyra" in r.output


def test_make_data_command_writes_the_set(tmp_path):
    r = CliRunner().invoke(app, ["longctx", "make-data", "--out", str(tmp_path), "--needle", "3", "--conflict", "2", "--demos", "1", "--lengths", "600"])
    assert r.exit_code == 0 and (tmp_path / "needle_tasks.jsonl").is_file() and (tmp_path / "sft.jsonl").is_file()
