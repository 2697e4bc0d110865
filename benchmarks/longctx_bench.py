"""Long-document QA benchmark: chunk -> index -> rank -> answer -> verify, oracle reader.

    .venv/bin/python benchmarks/longctx_bench.py [--seed 0 --docs 36 --max-tokens 512]

A synthetic set (posttrain/longctx/synth.py): documents of 20k-200k characters in four
styles (markdown, numbered sections, pages, plain paragraphs), 7 answerable questions
and 1 unanswerable question per document, gold answers and gold spans, seed recorded.
The OracleReader stands in for the model's answer step (it never sees gold when
ranking), so the table isolates chunking, ranking and verification. Rows run side by
side in one process on the same documents:
- hybrid ranking (text BM25 + summary BM25), clean oracle and noisy oracle (mis-cites,
  fabricated values, confident guesses when the answer is absent);
- text-BM25 only, for the value of the summary index;
- the full document as context (what "just feed it all" reads), for the cost ratio.
Metrics: gold-chunk recall@k (k=5 unless the row says); citation precision of the reader's draft and after
verification; answer accuracy ("not found" is right only for unanswerable questions);
tokens read per question / document tokens; summary-cache hit rate; median ms/question.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.longctx import CharTokenizer, Gold, LongDoc, OracleReader, SummaryCache  # noqa: E402
from posttrain.longctx.rank import rank  # noqa: E402
from posttrain.longctx.synth import make_corpus  # noqa: E402


def _overlaps(s: int, e: int, gs: int, ge: int) -> bool:
    return max(s, gs) < min(e, ge) and (min(e, ge) - max(s, gs)) >= 0.5 * (ge - gs)


def run_config(corpus, name: str, max_tokens: int, noise: float, weights=None, top_k: int = 5) -> dict:
    rows = {"recall": [], "draft_ok": 0, "draft_n": 0, "kept_ok": 0, "kept_n": 0, "acc": [], "nf_acc": [], "read": [], "ms": [], "hits": 0, "lookups": 0}
    for sd in corpus:
        gold = {q.question: Gold(q.answer, q.start, q.end) for q in sd.qa}
        reader = OracleReader(gold, noise=noise, seed=sd.seed)
        ld = LongDoc(sd.doc, reader, CharTokenizer(), max_tokens=max_tokens, cache=SummaryCache())
        for q in sd.qa:
            t0 = time.perf_counter()
            if weights is not None:  # ranking-only variant: same index, other weights
                idx, *_ = ld.index()
                ranked = rank(idx, q.question, top_k, weights)
                res = None
            else:
                res = ld.ask(q.question, top_k=top_k)
                ranked = res.ranked
                rows["hits"] += res.cost.cache_hits
                rows["lookups"] += res.cost.cache_hits + res.cost.cache_misses
                rows["read"].append(res.cost.read_fraction)
            rows["ms"].append(1000 * (time.perf_counter() - t0))
            if q.answer is not None:
                rows["recall"].append(any(_overlaps(r.chunk.start, r.chunk.end, q.start, q.end) for r in ranked))
            if res is None:
                continue
            for claim in res.draft:
                for c in claim.citations:
                    rows["draft_n"] += 1
                    rows["draft_ok"] += q.answer is not None and claim.text == q.answer and _overlaps(c.start, c.end, q.start, q.end)
            for cc in res.verified.claims:
                for c in cc.citations:
                    rows["kept_n"] += 1
                    rows["kept_ok"] += q.answer is not None and cc.claim.text == q.answer and _overlaps(c.start, c.end, q.start, q.end)
            (rows["acc"] if q.answer is not None else rows["nf_acc"]).append(res.answer == (q.answer or "not found"))
    return {"name": name, **rows}


def fmt(r: dict) -> str:
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    prec = lambda ok, n: ok / n if n else float("nan")  # noqa: E731
    cells = [
        r["name"],
        f"{mean(r['recall']):.3f}",
        f"{prec(r['draft_ok'], r['draft_n']):.3f}" if r["draft_n"] else "-",
        f"{prec(r['kept_ok'], r['kept_n']):.3f}" if r["kept_n"] else "-",
        f"{mean(r['acc']):.3f}" if r["acc"] else "-",
        f"{mean(r['nf_acc']):.3f}" if r["nf_acc"] else "-",
        f"{mean(r['read']):.4f}" if r["read"] else "-",
        f"{r['hits'] / r['lookups']:.3f}" if r["lookups"] else "-",
        f"{statistics.median(r['ms']):.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=36)
    ap.add_argument("--max-tokens", type=int, default=512)
    args = ap.parse_args()
    corpus = make_corpus(args.seed, args.docs)
    n_q = sum(len(sd.qa) for sd in corpus)
    n_ans = sum(q.answer is not None for sd in corpus for q in sd.qa)
    lens = sorted(len(sd.doc) for sd in corpus)
    print(f"seed={args.seed} docs={len(corpus)} questions={n_q} (answerable {n_ans}) doc chars min/median/max="
          f"{lens[0]}/{lens[len(lens) // 2]}/{lens[-1]} max_tokens={args.max_tokens} (char tokenizer) top_k=5")
    configs = [
        ("hybrid, oracle clean", args.max_tokens, 0.0, None),
        ("hybrid, oracle noisy (0.1)", args.max_tokens, 0.1, None),
        (f"hybrid, clean, max_tokens={args.max_tokens // 2}", args.max_tokens // 2, 0.0, None),
        ("hybrid, clean, top_k=1 (recall@1)", args.max_tokens, 0.0, None, 1),
        ("text BM25 only (ranking)", args.max_tokens, 0.0, {"text": 1.0, "summary": 0.0, "embed": 0.0}),
        ("summary BM25 only (ranking)", args.max_tokens, 0.0, {"text": 0.0, "summary": 1.0, "embed": 0.0}),
    ]
    print("| config | gold-chunk recall@k | cite prec. draft | cite prec. verified | answer acc. | not-found acc. | tokens read / doc | cache hit rate | ms/question (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, mt, noise, w, *k in configs:
        print(fmt(run_config(corpus, name, mt, noise, w, *k)), flush=True)
    print("| full document as context (baseline) | 1.000 | - | - | - | - | 1.0000 | - | - |")


if __name__ == "__main__":
    main()
