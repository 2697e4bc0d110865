"""Professional documents: ingestion, retrieval and citations on real PDFs and reports, with baselines.

    .venv/bin/python benchmarks/documents_bench.py                          # ingestion + retrieval (no model)
    .venv/bin/python benchmarks/documents_bench.py --xref 40 --reports 10   # smaller retrieval sets
    .venv/bin/python benchmarks/documents_bench.py --reader models/smollm2 --reader-tasks 30   # + SmolLM2 pass@1

Parts (all on the same questions within a part):
1. Ingestion: the 2,415-page R reference manual (r-doc-pdf) read on the text path; labels
   checked on every page that prints a number; the generated reports' tables (split ones
   included) extracted and compared cell by cell.
2. Retrieval (recall of the evidence chunk at top-5), `xref` (the real R manuals; evidence
   = the chunk on the target page that holds the answer) and `report_qa` (AA-LCR; evidence
   = a chunk holding the reference answer verbatim, for the questions whose answer occurs
   in the documents at most 5 times):
   - pipeline: PDF chunks by page and outline (markdown sections for AA-LCR), hybrid rank
     (text + summary BM25, outline path, printed-page resolution);
   - BM25 over the raw text: fixed windows of the same size, no structure, top-5;
   - truncation: the document cut to the model's context (8192 tokens, ~4 chars a token):
     does the evidence lie inside it;
   - whole document: whether it fits the context at all.
3. Citation precision after verification: the oracle reader (noise 0.1: mis-cites,
   fabrications) answers xref `follow` questions over the pipeline's top-5; the share of kept
   citations whose page is the evidence page.
4. With `--reader DIR`: pass@1 (greedy) of the reader on the built-in suites xref,
   table_extract and niah, with Wilson 95% intervals: the task prompt truncated to the context
   (truncation) against the pipeline (prompt chunked, top-5 chunks for the question).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.longctx import CharTokenizer, Gold, LongDoc, OracleReader  # noqa: E402
from posttrain.longctx.chunk import Chunk  # noqa: E402
from posttrain.longctx.index import _BM25  # noqa: E402
from posttrain.longctx.pdf_chunk import split_pdf  # noqa: E402
from posttrain.longctx.tokens import terms  # noqa: E402
from posttrain.tasks.documents.pdf import load_pdf, printed_numbers  # noqa: E402

CHUNK_CHARS = 1500  # ~400 SmolLM2 tokens: five chunks and a question fit a 4k prompt
CONTEXT_CHARS = 8192 * 4  # SmolLM2's 8k context at ~4 characters a token


def raw_windows(text: str, size: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    return [(s, min(len(text), s + size)) for s in range(0, len(text), size)]


def bm25_top(text: str, windows: list[tuple[int, int]], question: str, k: int = 5, bm=None) -> list[tuple[int, int]]:
    bm = bm or _BM25([terms(text[s:e]) for s, e in windows])
    sc = bm.scores(terms(question))
    return [windows[i] for i in sorted(range(len(sc)), key=lambda i: -sc[i])[:k]]


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return max(a[0], b[0]) < min(a[1], b[1])


def ingestion() -> None:
    from posttrain.tasks.documents.rdocs import r_manual
    from posttrain.tasks.documents.report_pdf import build_report

    t0 = time.perf_counter()
    ref = load_pdf(r_manual("refman"))
    wall = time.perf_counter() - t0
    numbered = [p for p in ref.pages if printed_numbers(p.text)]
    right = sum(p.label in printed_numbers(p.text) for p in numbered)
    print(f"refman: {len(ref.pages)} pages, {len(ref.text)} chars, {len(ref.outline)} outline entries in {wall:.2f}s (text path); "
          f"labels right on {right}/{len(numbered)} pages that print a number")
    exact = split = total = 0
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(10):
            rep = build_report(Path(tmp) / f"r{seed}.pdf", seed)
            got = load_pdf(Path(tmp) / f"r{seed}.pdf", tables=True).tables
            for g, t in zip(rep.tables, got):
                total += 1
                exact += (g.header, g.rows) == (t.header, t.rows)
                split += len(t.pages) > 1 and (g.header, g.rows) == (t.header, t.rows)
            total += max(0, len(rep.tables) - len(got))
    print(f"generated reports: {exact}/{total} tables extracted exactly, {split} of them split across pages")


def xref_questions(n: int, seed: int):
    from posttrain.tasks.documents.xref import items, manual

    rng = random.Random(seed)
    pool = list(items())
    rng.shuffle(pool)
    out = []
    for kind, name, src, tgt, title, expected in pool[:n]:
        pdf = manual(name)
        label = pdf.pages[tgt].label
        if kind == "follow":
            q = f"The manual refers to \"[{title}], page {label}\". What are the first words of the section \"{title}\" there?"
            needle = expected.split()[0]
        else:
            q = f"On which printed page number does the section \"{title}\" begin?"
            needle = title
        s, e = pdf.starts[tgt], pdf.ends[tgt]
        at = pdf.text.find(needle, s, e)
        out.append((name, q, (at, at + len(needle)) if at >= 0 else (s, e), tgt, kind, expected))
    return out


def retrieval_xref(n: int, seed: int) -> None:
    from posttrain.tasks.documents.xref import manual

    qs = xref_questions(n, seed)
    docs: dict[str, tuple] = {}
    hits = {"pipeline": 0, "bm25": 0, "trunc": 0}
    for name, q, ev, tgt, kind, _ in qs:
        if name not in docs:
            pdf = manual(name)
            chunks = split_pdf(pdf, CHUNK_CHARS, CharTokenizer())
            ld = LongDoc(pdf.text, OracleReader({}), CharTokenizer(), chunks=chunks)
            wins = raw_windows(pdf.text)
            docs[name] = (pdf, ld, wins, _BM25([terms(pdf.text[s:e]) for s, e in wins]))
        pdf, ld, wins, bm = docs[name]
        from posttrain.longctx.rank import rank

        idx, *_ = ld.index()
        hits["pipeline"] += any(overlaps((r.chunk.start, r.chunk.end), ev) for r in rank(idx, q, 5))
        hits["bm25"] += any(overlaps(w, ev) for w in bm25_top(pdf.text, wins, q, 5, bm))
        hits["trunc"] += ev[1] <= CONTEXT_CHARS
    fits = sum(len(docs[name][0].text) <= CONTEXT_CHARS for name in docs)
    _report("xref (R manuals)", len(qs), hits, f"{fits}/{len(docs)} manuals fit the context whole")


def retrieval_reports(n: int, seed: int) -> None:
    from posttrain.tasks.documents.report_qa import rows

    picked = [r for r in rows() if len(r[2]) >= 4 and 1 <= r[3].count(r[2]) <= 5]
    random.Random(seed).shuffle(picked)
    picked = picked[:n]
    hits = {"pipeline": 0, "bm25": 0, "trunc": 0}
    fits = 0
    for _, q, a, ctx in picked:
        evs = [(m.start(), m.end()) for m in re.finditer(re.escape(a), ctx)]
        ld = LongDoc(ctx, OracleReader({}), CharTokenizer(), max_tokens=CHUNK_CHARS)
        from posttrain.longctx.rank import rank

        idx, *_ = ld.index()
        top = rank(idx, q, 5)
        hits["pipeline"] += any(overlaps((r.chunk.start, r.chunk.end), ev) for r in top for ev in evs)
        wins = raw_windows(ctx)
        hits["bm25"] += any(overlaps(w, ev) for w in bm25_top(ctx, wins, q, 5) for ev in evs)
        hits["trunc"] += any(ev[1] <= CONTEXT_CHARS for ev in evs)
        fits += len(ctx) <= CONTEXT_CHARS
    _report("report_qa (AA-LCR)", len(picked), hits, f"{fits}/{len(picked)} document sets fit the context whole")


def _report(name: str, n: int, hits: dict, fits: str) -> None:
    p, b, t = (hits[k] / n if n else float("nan") for k in ("pipeline", "bm25", "trunc"))
    verdict = "meets the +20-point target" if p - b >= 0.20 else "does NOT beat BM25 by 20 points"
    print(f"| {name} | {n} | {p:.3f} | {b:.3f} | {t:.3f} | {fits} | {100 * (p - b):+.1f} pts: {verdict} |")


def citation_precision(n: int, seed: int) -> None:
    """The oracle reader's claims (noisy) cite chunks; each becomes "claim [p. label]" and is
    checked against the cited page's text (page_verify). Precision: kept claims citing the evidence page."""
    from posttrain.longctx.page_verify import verify_page_claims
    from posttrain.tasks.documents.xref import manual

    qs = [x for x in xref_questions(4 * n, seed) if x[4] == "follow"][:n]
    drafted = kept = right = right_draft = 0
    chunks: dict[str, list[Chunk]] = {}
    for name, q, _ev, tgt, _, expected in qs:
        pdf = manual(name)
        m = re.compile(r"\s+".join(map(re.escape, expected.split()))).search(pdf.text, pdf.starts[tgt], pdf.ends[tgt])
        if m is None:
            continue
        chunks.setdefault(name, split_pdf(pdf, CHUNK_CHARS, CharTokenizer()))
        ld = LongDoc(pdf.text, OracleReader({q: Gold(expected, m.start(), m.end())}, noise=0.1, seed=seed), CharTokenizer(), chunks=chunks[name])
        res = ld.ask(q, top_k=5)
        for claim in res.draft:
            for c in claim.citations:
                drafted += 1
                right_draft += pdf.page_at(c.start) == tgt and claim.text == expected
                label = pdf.pages[pdf.page_at(c.start)].label
                [check] = verify_page_claims([f"{claim.text} [p. {label}]"], q, pdf)
                kept += check.supported
                right += check.supported and pdf.page_at(c.start) == tgt and claim.text == expected
    print(f"page citations, oracle reader with noise 0.1, {len(qs)} xref follow questions: {drafted} drafted "
          f"(precision {right_draft / drafted if drafted else float('nan'):.3f}), {kept} kept by page verification, {right} of them "
          f"right (answer and evidence page): verified precision {right / kept if kept else float('nan'):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--xref", type=int, default=120, help="xref retrieval questions")
    ap.add_argument("--reports", type=int, default=20, help="AA-LCR retrieval questions")
    ap.add_argument("--cite", type=int, default=40, help="xref questions for citation precision")
    ap.add_argument("--skip-ingest", action="store_true")
    ap.add_argument("--reader", type=Path, default=None, help="a model directory: run the reader pass@1 part")
    ap.add_argument("--reader-tasks", type=int, default=30, help="tasks per suite for the reader part")
    ap.add_argument("--reader-engine", default="hf", help="generation engine for the reader (hf, fast)")
    ap.add_argument("--reader-max-new", type=int, default=512, help="cap on answer tokens (table_extract asks up to 2048)")
    ap.add_argument("--reader-suites", default="xref,table_extract,niah", help="comma-separated suites for the reader part")
    ap.add_argument("--reader-context", type=int, default=None, help="tokens the reader reads (default: its whole window)")
    ap.add_argument("--reader-batch", type=int, default=1, help="prompts the reader decodes together (fast engine: 8-16)")
    args = ap.parse_args()
    if not args.skip_ingest:
        ingestion()
    if args.xref or args.reports or args.cite:
        retrieval(args)
    if args.reader is not None:
        from benchmarks.documents_reader import reader_pass_at_1

        reader_pass_at_1(args.reader, args.reader_tasks, args.seed, args.reader_engine, args.reader_max_new,
                         tuple(args.reader_suites.split(",")), args.reader_context, args.reader_batch)


def retrieval(args: argparse.Namespace) -> None:
    print(f"chunks of {CHUNK_CHARS} chars; context {CONTEXT_CHARS} chars; top-5; seed {args.seed}")
    print("| set | questions | pipeline recall@5 | BM25 raw recall@5 | truncation (evidence in context) | whole document | pipeline - BM25 |")
    print("|---|---|---|---|---|---|---|")
    retrieval_xref(args.xref, args.seed)
    retrieval_reports(args.reports, args.seed)
    citation_precision(args.cite, args.seed)


if __name__ == "__main__":
    main()
