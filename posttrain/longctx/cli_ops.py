"""Library calls behind `posttrain longctx`: load (text or PDF), build the reader, ask, report as JSON."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from posttrain.errors import ConfigError
from posttrain.longctx.chunk import Chunk, split_by_structure
from posttrain.longctx.document import load_document
from posttrain.longctx.pdf_chunk import split_pdf
from posttrain.tasks.documents.pdf import DEFAULT_MAX_BYTES, PdfDoc, is_pdf, load_pdf
from posttrain.longctx.index import SummaryCache
from posttrain.longctx.pipeline import LongDoc, Result
from posttrain.longctx.tokens import CharTokenizer


def load_source(doc_path: Path, max_bytes: int = DEFAULT_MAX_BYTES, tables: bool = False) -> tuple[str, PdfDoc | None]:
    """(text, pdf): a PDF is read page by page (pdf.text joins the pages); text as UTF-8.
    Either is refused before any work when it is over `max_bytes`."""
    if is_pdf(doc_path):
        pdf = load_pdf(doc_path, tables=tables, max_bytes=max_bytes)
        return pdf.text, pdf
    return load_document(doc_path, max_bytes=max_bytes), None


def split_source(doc: str, pdf: PdfDoc | None, max_tokens: int, tok: Any) -> list[Chunk]:
    return split_pdf(pdf, max_tokens, tok) if pdf is not None else split_by_structure(doc, max_tokens, tok)


def result_json(res: Result, doc: str, by_id: dict[str, Chunk]) -> dict[str, Any]:
    cites = [{"chunk": c.chunk_id, "start": c.start, "end": c.end, "path": list(by_id[c.chunk_id].path), "quote": doc[c.start : c.end],
              "page": by_id[c.chunk_id].page, "page_label": by_id[c.chunk_id].label or str(by_id[c.chunk_id].page)}
             for cc in res.verified.claims if not cc.reason for c in cc.citations]
    k = res.cost
    return {
        "question": res.question, "answer": res.answer, "found": res.found, "confidence": round(res.confidence, 4),
        "citations": cites, "removed": [{"claim": r.claim.text, "reason": r.reason} for r in res.verified.removed],
        "candidates": [{"chunk": r.chunk.id, "score": round(r.score, 4)} for r in res.ranked],
        "cost": {"doc_tokens": k.doc_tokens, "read_tokens": k.read_tokens, "read_fraction": round(k.read_fraction, 4),
                 "index_tokens": k.index_tokens, "cache_hits": k.cache_hits, "cache_misses": k.cache_misses, "wall_s": round(k.wall_s, 3)},
    }


def ask_file(doc_path: Path, question: str, model_dir: Path, engine: str = "fast", max_tokens: int | None = None,
             top_k: int = 5, threshold: float = 0.6, nli: bool = False, cache: Path | None = None,
             max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    from posttrain.longctx.model_reader import ModelReader, ModelSupport
    from posttrain.models.io import load_policy
    from posttrain.rollout import make_engine

    if not question.strip():
        raise ConfigError("--question is empty")
    if top_k < 1:
        raise ConfigError(f"--top-k must be >= 1, got {top_k}")
    doc, pdf = load_source(doc_path, max_bytes)
    model, tok = load_policy(model_dir)
    eng = make_engine(engine, model, tok)
    ctx = int(getattr(model.config, "max_position_embeddings", 2048))
    reader = ModelReader(eng, tok, context_tokens=ctx, name=str(Path(model_dir).resolve()))
    budget = max_tokens or reader.chunk_budget(question)
    sc = SummaryCache(cache) if cache else SummaryCache()
    ld = LongDoc(doc, reader, tok, max_tokens=budget, cache=sc, chunks=split_source(doc, pdf, budget, tok) if pdf else None)
    res = ld.ask(question, top_k=top_k, threshold=threshold, supporter=ModelSupport(eng, tok) if nli else None)
    sc.save()
    return result_json(res, doc, {c.id: c for c in ld.chunks})


def chunk_file(doc_path: Path, max_tokens: int, model_dir: Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Chunk]:
    tok: Any = CharTokenizer()
    if model_dir is not None:
        from transformers import AutoTokenizer

        if not (Path(model_dir) / "config.json").is_file() and not Path(model_dir).is_dir():
            raise ConfigError(f"model directory not found: {model_dir}")
        tok = AutoTokenizer.from_pretrained(model_dir)
    doc, pdf = load_source(doc_path, max_bytes)
    return split_source(doc, pdf, max_tokens, tok)


def ingest_file(doc_path: Path, tables: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """What `posttrain longctx ingest` reports: pages with labels, outline, tables, image-only pages."""
    t0 = time.perf_counter()
    doc, pdf = load_source(doc_path, max_bytes, tables)
    wall = time.perf_counter() - t0
    if pdf is None:
        return {"file": str(doc_path), "kind": "text", "chars": len(doc), "wall_s": round(wall, 3)}
    return {"file": str(doc_path), "kind": "pdf", "pages": len(pdf.pages), "chars": len(doc), "wall_s": round(wall, 3),
            "labels": [p.label for p in pdf.pages], "image_only_pages": [i + 1 for i in pdf.image_only],
            "outline": [{"level": h.level, "title": h.title, "page": h.page + 1, "label": pdf.pages[h.page].label} for h in pdf.outline],
            "tables": [{"pages": [i + 1 for i in t.pages], "header": list(t.header), "rows": [list(r) for r in t.rows]} for t in pdf.tables]}
