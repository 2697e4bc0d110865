"""Long documents as a budget: structural chunking, a per-chunk index, hybrid ranking,
answers with citations, and verification of every citation against the source.

    from posttrain.longctx import LongDoc, OracleReader, CharTokenizer
    res = LongDoc(doc, reader, tokenizer, max_tokens=512).ask(question)

See docs/longctx.md. Nothing here imports torch at module import time.
"""

from posttrain.longctx.chunk import Chunk, split_by_structure
from posttrain.longctx.index import DocIndex, SummaryCache
from posttrain.longctx.oracle import Gold, OracleReader
from posttrain.longctx.pipeline import Cost, LongDoc, Result
from posttrain.longctx.rank import Ranked, merge, rank
from posttrain.longctx.reader import Citation, Claim, Reader
from posttrain.longctx.tokens import CharTokenizer, TokenizerLike
from posttrain.longctx.verify import NOT_FOUND, LexicalSupport, Supporter, Verified, verify

__all__ = [
    "NOT_FOUND", "CharTokenizer", "Chunk", "Citation", "Claim", "Cost", "DocIndex", "Gold", "LexicalSupport",
    "LongDoc", "OracleReader", "Ranked", "Reader", "Result", "SummaryCache", "Supporter", "TokenizerLike",
    "Verified", "merge", "rank", "split_by_structure", "verify",
]
