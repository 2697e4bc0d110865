"""Chunk-summarise-reread demonstrations: the pipeline's own trace as a multi-turn trajectory.

    msgs = demonstration(sd.doc, qa, max_tokens=400)   # list[Message] ending in the cited answer

Turns: the question and the document's size; an `index` tool call whose observation
lists every chunk's id, section path and summary; a `read` tool call for the ranked
top-k whose observation is their full text; the verified answer with `[cN:start-end]`
citations, or "not found". The trace is produced by running `LongDoc.ask` with the
oracle reader, so every citation in a demonstration has passed verification.
"""

from __future__ import annotations

from typing import Any

from posttrain.longctx.oracle import Gold, OracleReader
from posttrain.longctx.pipeline import LongDoc
from posttrain.longctx.rank import render_context
from posttrain.longctx.synth import QA
from posttrain.longctx.tokens import CharTokenizer, TokenizerLike
from posttrain.types import Message, ToolCall, thaw

SYSTEM = ("You answer questions about long documents. Index first, read deeply second: list and summarise the "
          "chunks, re-read only the best ones, and answer with citations [chunk:start-end], or say not found.")


def demonstration(doc: str, qa: QA, max_tokens: int = 400, top_k: int = 3, tokenizer: TokenizerLike | None = None,
                  summary_chars: int = 120, chunks: list | None = None) -> list[Message]:
    """`chunks`: pre-made chunks (a PDF's, by page: `pdf_chunk.split_pdf`) instead of `split_by_structure`."""
    reader = OracleReader({qa.question: Gold(qa.answer, qa.start, qa.end)})
    ld = LongDoc(doc, reader, tokenizer or CharTokenizer(), max_tokens=max_tokens, chunks=chunks)
    res = ld.ask(qa.question, top_k=top_k)
    index, *_ = ld.index()
    listing = "\n".join(f"[{c.id}] {' > '.join(c.path) or '-'} :: {s[:summary_chars]}" for c, s in zip(index.chunks, index.summaries))
    ids = [c.id for c in res.context]
    if res.found:
        cites = " ".join(f"[{c.chunk_id}:{c.start}-{c.end}]" for cc in res.verified.claims[:1] for c in cc.citations)
        final = f"{res.answer} {cites}"
    else:
        final = "not found"
    return [
        Message("system", SYSTEM),
        Message("user", f"Document: {len(doc)} characters in {len(ld.chunks)} chunks.\nQuestion: {qa.question}"),
        Message("assistant", "Index the document first.", tool_calls=(ToolCall("index", {}, id="t0"),)),
        Message("tool", listing, name="index"),
        Message("assistant", f"Re-read the best candidates: {', '.join(ids)}.", tool_calls=(ToolCall("read", {"chunks": ids}, id="t1"),)),
        Message("tool", render_context(list(res.context)), name="read"),
        Message("assistant", final),
    ]


def demo_row(msgs: list[Message], **meta: Any) -> dict[str, Any]:
    return {"messages": [thaw(m) for m in msgs], **meta}
