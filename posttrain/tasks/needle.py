"""`needle`: RULER-style long-context retrieval with controlled depth and length.

A haystack of filler prose (seeded, built from word lists: no data download) hides
"needle" sentences `The special magic number for <key> is <value>.` Variants:
  - `single`: one needle, one key asked;
  - `multikey`: several needles with different keys; one is asked, the rest distract;
  - `multivalue`: one key carries several values; all must be returned;
  - `distractor`: near-miss keys (`amber-falcon` vs `amber-falcons`) with other values.
Knobs: `length` (words of haystack; default 256 * 4**difficulty), `depth` (0..1, where
the asked needle sits; default spread evenly over the batch), `variant` (default: cycle).
The verifier (`needle`) scores recall times precision of the 7-digit values named.
"""

from __future__ import annotations

import random

from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

ADJ = ["amber", "silent", "crimson", "hollow", "quiet", "brisk", "velvet", "lunar", "rapid", "gentle", "frozen", "golden"]
NOUN = ["falcon", "harbor", "meadow", "lantern", "glacier", "orchid", "canyon", "ember", "willow", "comet", "river", "quarry"]
FILL = ["the", "committee", "reviewed", "a", "report", "on", "regional", "rainfall", "while", "engineers", "measured", "bridge",
        "loads", "and", "students", "walked", "past", "old", "market", "stalls", "under", "grey", "skies", "before", "evening",
        "trains", "left", "for", "coast", "with", "quiet", "passengers", "reading", "newspapers", "about", "harvests"]
VARIANTS = ("single", "multikey", "multivalue", "distractor")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(FILL) for _ in range(rng.randrange(8, 16))]
    return " ".join(words).capitalize() + "."


def _haystack(rng: random.Random, words: int) -> list[str]:
    out, count = [], 0
    while count < words:
        s = _sentence(rng)
        out.append(s)
        count += s.count(" ") + 1
    return out


def _needle(key: str, value: int) -> str:
    return f"The special magic number for {key} is {value}."


@domain("needle")
class Needle:
    name = "needle"

    def __init__(self, length: int | None = None, depth: float | None = None, variant: str | None = None, max_new_tokens: int = 64) -> None:
        if variant is not None and variant not in VARIANTS:
            from posttrain.errors import ConfigError

            raise ConfigError(f"needle: unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
        if depth is not None and not 0.0 <= depth <= 1.0:
            from posttrain.errors import ConfigError

            raise ConfigError(f"needle: depth must be in [0, 1], got {depth}")
        self.length, self.depth, self.variant, self.max_new_tokens = length, depth, variant, max_new_tokens

    def _needles(self, rng: random.Random, variant: str) -> tuple[str, list[tuple[str, int]], list[int]]:
        keys = [f"{a}-{b}" for a in rng.sample(ADJ, 4) for b in rng.sample(NOUN, 1)]
        asked = keys[0]
        value = lambda: rng.randrange(1_000_000, 10_000_000)  # noqa: E731
        answers = [value() for _ in range(3 if variant == "multivalue" else 1)]
        needles = [(asked, v) for v in answers]
        if variant in ("multikey", "multivalue"):
            needles += [(k, value()) for k in keys[1:]]
        if variant == "distractor":
            needles += [(asked + "s", value()), (asked.split("-")[1] + "-" + asked.split("-")[0], value()), (keys[1], value())]
        return asked, needles, answers

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"needle:{seed}:{difficulty}")
        length = self.length or int(256 * 4 ** max(0.0, min(difficulty, 3.0)))
        tasks = []
        for i in range(n):
            variant = self.variant or VARIANTS[i % len(VARIANTS)]
            depth = self.depth if self.depth is not None else (i / (n - 1) if n > 1 else 0.5)
            asked, needles, answers = self._needles(rng, variant)
            hay = _haystack(rng, length)
            first = True
            for key, val in needles:  # the asked key's first value goes at `depth`, the rest anywhere
                pos = round(depth * len(hay)) if first else rng.randrange(len(hay) + 1)
                hay.insert(pos, _needle(key, val))
                first = False
            many = variant == "multivalue"
            q = (f"What {'are all the special magic numbers' if many else 'is the special magic number'} for {asked} "
                 f"mentioned in the text? Answer with {'the numbers' if many else 'the number'} only.")
            tasks.append(Task(
                id=f"needle-{seed}-{i}", domain=self.name,
                prompt=(Message("user", "Read the text and answer the question after it.\n\n" + " ".join(hay) + "\n\n" + q),),
                verifier=Spec("needle", {"values": answers}),
                difficulty=float(difficulty),
                limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
                metadata={"variant": variant, "depth": depth, "length_words": length, "key": asked,
                          "distractor_values": [v for k, v in needles if k != asked]},
                oracle=", ".join(map(str, answers)),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        right = task.oracle.split(", ") if task.oracle else []
        distract = [str(v) for v in task.metadata["distractor_values"]]
        if distract and rng.random() < 0.6:
            return rng.choice(distract)
        if len(right) > 1:
            return right[0]  # misses the other values
        return str(int(right[0]) + rng.choice([1, -1, 1000]))
