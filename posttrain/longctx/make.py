"""`posttrain longctx make-data`: write the long-context training set to a directory.

    make_data("data/longctx", seed=0, n_needle=200, n_conflict=100, n_demo=50)

Files: `needle_tasks.jsonl`, `conflict_tasks.jsonl` (RL / eval tasks in the task-spec
format, via posttrain.tasks.io), `sft.jsonl` (chat rows: reader rows for the pipeline's
answer step, conflict answers, chunk-summarise-reread demonstrations) and
`manifest.json` (seed, knobs and counts, so the set can be regenerated).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from posttrain.errors import ConfigError
from posttrain.longctx.data import conflict_tasks, needle_tasks, reader_rows, task_rows
from posttrain.longctx.demos import demo_row, demonstration
from posttrain.longctx.synth import make_document
from posttrain.longctx.tokens import CharTokenizer, TokenizerLike


def write_jsonl(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def make_data(out: str | Path, seed: int = 0, n_needle: int = 200, n_conflict: int = 100, n_demo: int = 50,
              lengths: Sequence[int] = (1024, 4096), depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
              n_needles: int = 1, distractors: int = 0, chunk_tokens: int = 120,
              tokenizer: TokenizerLike | None = None) -> dict[str, Any]:
    from posttrain.tasks.io import save_tasks

    if min(n_needle, n_conflict, n_demo) < 0:
        raise ConfigError("make-data counts must be >= 0")
    if not lengths or min(lengths) < 64:
        raise ConfigError(f"needle lengths must be >= 64 characters, got {list(lengths)}")
    if not depths or not all(0.0 <= d <= 1.0 for d in depths):
        raise ConfigError(f"needle depths must lie in [0, 1], got {list(depths)}")
    tok = tokenizer or CharTokenizer()
    out = Path(out)
    needles = needle_tasks(n_needle, seed, lengths, depths, n_needles, distractors)
    conflicts = conflict_tasks(n_conflict, seed + 1)
    save_tasks(needles, out / "needle_tasks.jsonl")
    save_tasks(conflicts, out / "conflict_tasks.jsonl")
    rows = reader_rows(needles, tok, chunk_tokens, seed=seed) + task_rows(conflicts)
    rng = random.Random(seed + 2)
    for i in range(n_demo):
        sd = make_document(rng.randrange(2**31), rng.choice((8_000, 16_000)), ("markdown", "numbered", "pages", "plain")[i % 4], n_questions=1)
        qa = sd.qa[-1] if rng.random() < 0.25 else sd.qa[0]  # 1 in 4 teaches "not found"
        rows.append(demo_row(demonstration(sd.doc, qa), domain="longctx-demo", doc_seed=sd.seed))
    write_jsonl(rows, out / "sft.jsonl")
    manifest = {"seed": seed, "needle": {"n": n_needle, "lengths": list(lengths), "depths": list(depths), "needles": n_needles,
                "distractors": distractors}, "conflict": {"n": n_conflict}, "demos": n_demo, "chunk_tokens": chunk_tokens,
                "sft_rows": len(rows)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest
