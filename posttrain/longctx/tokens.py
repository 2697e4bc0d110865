"""Token counting and lexical terms shared by the chunker, the index and the verifier.

A tokenizer here is anything with `encode(str) -> list[int]` (an HF tokenizer, the tiny
model's character tokenizer, `CharTokenizer`). Counting goes through `TokenCounter`,
which memoises by text so the chunker can re-measure candidate merges cheaply.

`terms()` is the lexical view used by BM25 and by the overlap check: lower-cased word
and number tokens minus a small English stopword list. It does no stemming beyond a
plural "s", so "codes" matches "code" but "boiling" does not match "boils".
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable


@runtime_checkable
class TokenizerLike(Protocol):
    def encode(self, text: str) -> list[int]: ...


class CharTokenizer:
    """One token per Unicode character: the budget unit of a character-level model."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


class TokenCounter:
    """`count(text)` under a tokenizer, cached; HF tokenizers get no special tokens."""

    def __init__(self, tokenizer: TokenizerLike) -> None:
        if not callable(getattr(tokenizer, "encode", None)):
            raise TypeError(f"tokenizer must have encode(str) -> list[int], got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self._cache: dict[str, int] = {}
        self._is_char = isinstance(tokenizer, CharTokenizer)

    def _encode(self, text: str) -> list[int]:
        try:  # HF tokenizers would otherwise add BOS/EOS and overcount every chunk
            return list(self.tokenizer.encode(text, add_special_tokens=False))  # type: ignore[call-arg]
        except TypeError:
            return list(self.tokenizer.encode(text))

    def count(self, text: str) -> int:
        if self._is_char:
            return len(text)
        n = self._cache.get(text)
        if n is None:
            n = len(self._encode(text))
            if len(self._cache) < 200_000:
                self._cache[text] = n
        return n


_WORD = re.compile(r"[A-Za-z]+|\d+(?:[.,]\d+)*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
STOPWORDS = frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was
    were what which who whom whose when where why how with does do did not no yes than then
    there their they them these those into over under about after before between can could
    will would should shall may might must been being also any all each per via""".split()
)


def _norm(word: str) -> str:
    w = word.lower()
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and not w[0].isdigit():
        w = w[:-1]
    return w


def terms(text: str) -> list[str]:
    """Content terms in order of appearance (stopwords dropped, plural 's' folded)."""
    return [t for t in (_norm(m.group()) for m in _WORD.finditer(text)) if t not in STOPWORDS]


def numbers(text: str) -> set[str]:
    """Numeric tokens with separators removed ("4,417" and "4417" are the same number)."""
    return {re.sub(r"[.,](?=\d{3}\b)", "", m.group()) for m in _NUMBER.finditer(text)}
