"""Long-context training data from real documents: `posttrain longctx make-data --real`.

    make_real_data("data/longctx-real", seed=0, n_niah=60, n_xref=60, n_table=20, n_demo=20)

Files (task-spec JSONL for RL, chat rows for SFT, like `make.py`):
- `niah_tasks.jsonl`: RULER needles on its real haystacks at every (length, depth) of the
  grid, in the model's tokens when `tokenizer` names a model directory;
- `xref_tasks.jsonl`, `table_tasks.jsonl`: cross-page references of the R manuals and
  tables of generated report PDFs (split across pages included);
- `sft.jsonl`: the oracle answers of those tasks, plus chunk-summarise-reread
  demonstrations on the real manuals: the pipeline's own trace over the whole manual
  (PDF chunks by page, outline paths) for an xref question, ending in the verified answer;
- `manifest.json`: seed, knobs and counts.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Sequence

from posttrain.longctx.data import task_rows
from posttrain.longctx.demos import demo_row, demonstration
from posttrain.longctx.make import write_jsonl
from posttrain.longctx.pdf_chunk import split_pdf
from posttrain.longctx.synth import QA
from posttrain.longctx.tokens import CharTokenizer


def xref_demonstrations(n: int, seed: int, chunk_chars: int = 1500) -> list[dict[str, Any]]:
    """Pipeline traces over whole R manuals for xref `follow` questions (answers verified)."""
    from posttrain.tasks.documents.xref import items, manual

    follow = [x for x in items() if x[0] == "follow"]
    random.Random(f"xref-demo:{seed}").shuffle(follow)
    rows, chunks = [], {}
    for _, name, _src, tgt, title, expected in follow[:n]:
        pdf = manual(name)
        m = re.compile(r"\s+".join(map(re.escape, expected.split()))).search(pdf.text, pdf.starts[tgt], pdf.ends[tgt])
        if m is None:
            continue
        label = pdf.pages[tgt].label
        q = f"The manual refers to \"[{title}], page {label}\". What are the first five words of that section?"
        chunks.setdefault(name, split_pdf(pdf, chunk_chars, CharTokenizer()))
        msgs = demonstration(pdf.text, QA(q, expected, m.start(), m.end(), title, "first words"), top_k=3, chunks=chunks[name])
        rows.append(demo_row(msgs, domain="xref-demo", manual=name, page=label))
    return rows


def make_real_data(out: str | Path, seed: int = 0, n_niah: int = 60, n_xref: int = 60, n_table: int = 20, n_demo: int = 20,
                   lengths: Sequence[int] = (1024, 2048, 4096), depths: Sequence[int] = (0, 25, 50, 75, 100),
                   tokenizer: str | None = None) -> dict[str, Any]:
    from posttrain.tasks.documents.niah import Niah
    from posttrain.tasks.documents.table_extract import TableExtract
    from posttrain.tasks.documents.xref import XRef
    from posttrain.tasks.io import save_tasks

    out = Path(out)
    niah = Niah(lengths=tuple(lengths), depths=tuple(depths), tokenizer=tokenizer).generate(n_niah, seed)
    xref = XRef().generate(n_xref, seed)
    tables = TableExtract().generate(n_table, seed)
    save_tasks(niah, out / "niah_tasks.jsonl")
    save_tasks(xref, out / "xref_tasks.jsonl")
    save_tasks(tables, out / "table_tasks.jsonl")
    rows = task_rows(niah) + task_rows(xref) + task_rows(tables) + xref_demonstrations(n_demo, seed)
    write_jsonl(rows, out / "sft.jsonl")
    manifest = {"seed": seed, "niah": {"n": n_niah, "lengths": list(lengths), "depths": list(depths), "tokenizer": tokenizer or "whitespace"},
                "xref": {"n": n_xref}, "table_extract": {"n": n_table}, "demos": n_demo, "sft_rows": len(rows)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest
