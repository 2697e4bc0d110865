"""`table_extract`: one table of a generated multi-page financial report, extracted to JSON.

Each task builds a seeded report PDF (`report_pdf.py`, reportlab), reads the pages the asked
table spans with pdfium exactly as a document pipeline would, and asks for the table as
{"header": [...], "rows": [[...], ...]}. Long schedules break across pages (their header
repeats on the continuation, which must not become a row). Ground truth is the cells the
generator drew; `table_cells` checks them one by one, and an empty or header-only table
scores 0.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from posttrain.registry import domain
from posttrain.tasks.documents.pdf import load_pdf
from posttrain.tasks.documents.report_pdf import build_report
from posttrain.types import Limits, Message, Spec, Task

SCHEMA = {"type": "object", "required": ["header", "rows"],
          "properties": {"header": {"type": "array", "items": {"type": "string"}},
                         "rows": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}}


@domain("table_extract")
class TableExtract:
    name = "table_extract"

    def __init__(self, max_new_tokens: int = 2048) -> None:
        self.max_new_tokens = max_new_tokens

    def _one(self, seed: int, i: int, rng: random.Random, difficulty: float) -> Task:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "report.pdf"
            rep = build_report(path, seed * 100_003 + i)
            pdf = load_pdf(path, tables=True)
        k = rng.randrange(len(rep.tables))
        if difficulty >= 1.0 and rng.random() < 0.5:  # half the tasks ask for a table that breaks across pages
            k = max(range(len(rep.tables)), key=lambda j: (len(pdf.tables[j].pages), rng.random()))
        t, found = rep.tables[k], pdf.tables[k]
        pages = "\n\n".join(f"=== page {pdf.pages[p].label} ===\n{pdf.pages[p].text.strip()}" for p in found.pages)
        prompt = (f"Text of the pages of {rep.company}'s annual report {rep.year} that hold Table {k + 1}, extracted from the PDF:\n\n"
                  f"{pages}\n\nExtract Table {k + 1} (\"{t.title}\") as one JSON object matching this schema: "
                  f"{json.dumps(SCHEMA)}. Copy every cell exactly as printed; a header repeated on a later page is not a row.")
        return Task(
            id=f"table_extract-{seed}-{i}", domain=self.name, prompt=(Message("user", prompt),),
            verifier=Spec("table_cells", {"header": list(t.header), "rows": [list(r) for r in t.rows]}),
            difficulty=float(difficulty), limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
            metadata={"company": rep.company, "table": k + 1, "pages": [p + 1 for p in found.pages], "rows": len(t.rows),
                      "split": len(found.pages) > 1, "probe_kind": "structured", "answer_format": "long"},
            oracle=json.dumps({"header": list(t.header), "rows": [list(r) for r in t.rows]}),
        )

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"table_extract:{seed}:{difficulty}")
        return [self._one(seed, i, rng, difficulty) for i in range(n)]

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        want = json.loads(task.oracle or "{}")
        rows = [list(r) for r in want["rows"]]
        if rng.random() < 0.5 and len(rows) > 1:
            rows.pop(rng.randrange(len(rows)))  # a row lost at a page break
        else:
            r = rng.randrange(len(rows))
            rows[r][-1] = rows[r][-1] + "0"
        return json.dumps({"header": want["header"], "rows": rows})
