"""`posttrain longctx ask|chunk|make-data`: thin calls into posttrain.longctx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def ask_cmd(
    doc: Path = typer.Argument(..., help="The document: a PDF, or UTF-8 text (Markdown, plain, paged)."),
    question: str = typer.Option(..., "--question", "-q", help="The question to answer from the document."),
    model: Path = typer.Option(..., "--model", help="Hugging Face causal-LM directory (the reader)."),
    engine: str = typer.Option("fast", help="Generation engine: fast, hf, ..."),
    max_tokens: Optional[int] = typer.Option(None, help="Chunk budget in model tokens (default: what fits one answer call)."),
    top_k: int = typer.Option(5, help="Chunks re-read by the answer step."),
    threshold: float = typer.Option(0.6, help="Below this confidence the answer is 'not found'."),
    nli: bool = typer.Option(False, "--nli", help="Check support with the model (NLI-style) instead of lexical overlap."),
    cache: Optional[Path] = typer.Option(None, help="JSON file caching chunk summaries across runs."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
    max_mb: float = typer.Option(256.0, "--max-mb", help="Refuse a document larger than this many MiB before any work."),
) -> None:
    """Answer a question about a long document with verified citations, or say 'not found'."""
    from posttrain.longctx.cli_ops import ask_file

    out = ask_file(doc, question, model, engine, max_tokens, top_k, threshold, nli, cache, int(max_mb * 2**20))
    if as_json:
        print(json.dumps(out))
        return
    print(out["answer"] + (f"   (confidence {out['confidence']:.2f})" if out["found"] else ""))
    for c in out["citations"]:
        print(f"  [{c['chunk']}:{c['start']}-{c['end']} p.{c['page_label']}] {' > '.join(c['path'])}: {c['quote']!r}")
    for r in out["removed"]:
        print(f"  removed: {r['claim']!r}: {r['reason']}")
    k = out["cost"]
    print(f"read {k['read_tokens']}/{k['doc_tokens']} tokens ({100 * k['read_fraction']:.1f}%), index {k['index_tokens']} tokens, "
          f"cache {k['cache_hits']} hits / {k['cache_misses']} misses, {k['wall_s']:.2f}s")


def chunk_cmd(
    doc: Path = typer.Argument(..., help="The document to split."),
    max_tokens: int = typer.Option(512, help="Chunk budget in tokens."),
    model: Optional[Path] = typer.Option(None, "--model", help="Count tokens with this model's tokenizer (default: characters)."),
    max_mb: float = typer.Option(256.0, "--max-mb", help="Refuse a document larger than this many MiB before any work."),
) -> None:
    """Show how a document splits: id, kind, page (printed label for a PDF), tokens, offsets, section path."""
    from posttrain.longctx.cli_ops import chunk_file

    for c in chunk_file(doc, max_tokens, model, int(max_mb * 2**20)):
        page = f"p{c.page}" + (f"({c.label})" if c.label else "")
        print(f"{c.id}\t{c.kind}\t{page}\t{c.n_tokens}\t{c.start}-{c.end}\t{' > '.join(c.path)}")


def ingest_cmd(
    doc: Path = typer.Argument(..., help="A PDF (or text) document."),
    tables: bool = typer.Option(False, "--tables", help="Also extract ruled tables as cell grids (pdfplumber; ~0.1-0.3 s a page)."),
    max_mb: float = typer.Option(256.0, "--max-mb", help="Refuse a document larger than this many MiB before any work."),
    as_json: bool = typer.Option(False, "--json", help="Print everything as one JSON object."),
) -> None:
    """Read a PDF: pages with printed labels, the outline, image-only pages, tables (merged across pages)."""
    from posttrain.longctx.cli_ops import ingest_file

    out = ingest_file(doc, tables, int(max_mb * 2**20))
    if as_json:
        print(json.dumps(out))
        return
    if out["kind"] == "text":
        print(f"{out['file']}: text, {out['chars']} characters")
        return
    print(f"{out['file']}: {out['pages']} pages ({out['labels'][0]}..{out['labels'][-1]}), {len(out['outline'])} outline entries, "
          f"{len(out['tables'])} tables, {out['chars']} characters, {out['wall_s']:.2f}s")
    for p in out["image_only_pages"]:
        print(f"  page {p} ({out['labels'][p - 1]}) is image-only: no text layer (needs OCR)")
    for t in out["tables"]:
        print(f"  table on pages {t['pages']}: {len(t['rows'])} rows x {len(t['header'])} columns: {t['header']}")


def make_data_cmd(
    out: Path = typer.Option(Path("data/longctx"), "--out", help="Output directory."),
    seed: int = typer.Option(0, help="Generator seed (recorded in manifest.json)."),
    needle: int = typer.Option(200, help="Needle tasks (--real: RULER niah tasks, and as many xref tasks)."),
    conflict: int = typer.Option(100, help="Conflict tasks (--real: as many from the AA-LCR reports, and as many table_extract tasks)."),
    demos: int = typer.Option(50, help="Chunk-summarise-reread demonstrations."),
    lengths: str = typer.Option("1024,4096", help="Needle haystack lengths in characters, comma-separated."),
    depths: str = typer.Option("0,0.25,0.5,0.75,1", help="Needle depths in [0, 1], comma-separated."),
    needles: int = typer.Option(1, help="Needles per haystack (multi-key when > 1)."),
    distractors: int = typer.Option(0, help="Near-miss distractor needles per haystack."),
    chunk_tokens: int = typer.Option(120, help="Chunk budget for the reader SFT rows."),
    real: bool = typer.Option(False, "--real", help="From real documents instead: RULER needles, R-manual xref, report tables, demos on the manuals."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="--real: count needle lengths in this model's tokens."),
) -> None:
    """Write needle and conflict tasks (task-spec JSONL) and SFT rows (reader steps, demonstrations)."""
    from posttrain.errors import ConfigError
    from posttrain.longctx.make import make_data

    if real:
        from posttrain.longctx.real_data import make_real_data

        try:
            ls = [int(x) for x in lengths.split(",") if x.strip()] if lengths != "1024,4096" else [1024, 2048, 4096]
            ds = [int(round(100 * float(x))) for x in depths.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--lengths and --depths take comma-separated numbers, got {lengths!r} and {depths!r}") from None
        m = make_real_data(out, seed, needle, needle, conflict, demos, ls, ds, str(tokenizer) if tokenizer else None,
                           n_conflict=conflict)
        print(f"wrote {out}: {needle} niah + {needle} xref + {conflict} table + {conflict} conflict tasks, "
              f"{m['sft_rows']} SFT rows (seed {seed})")
        return

    try:
        ls = [int(x) for x in lengths.split(",") if x.strip()]
        ds = [float(x) for x in depths.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--lengths and --depths take comma-separated numbers, got {lengths!r} and {depths!r}") from None
    m = make_data(out, seed, needle, conflict, demos, ls, ds, needles, distractors, chunk_tokens)
    print(f"wrote {out}: {needle} needle tasks, {conflict} conflict tasks, {m['sft_rows']} SFT rows (seed {seed})")


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Long documents: chunk, index, rank, answer with citations, verify; training data.", no_args_is_help=True)
    sub.command("ask")(ask_cmd)
    sub.command("chunk")(chunk_cmd)
    sub.command("ingest")(ingest_cmd)
    sub.command("make-data")(make_data_cmd)
    app.add_typer(sub, name="longctx")
