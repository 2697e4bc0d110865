"""`ifbench`: IFBench's 294 instruction-following prompts (57 constraint types), checked by `ifbench`.

Loaded from site-packages (`ifbench/data/IFBench_test.jsonl`, Apache-2.0); nothing is
downloaded. Each task is the prompt as written, with its constraint list in the verifier
spec (strict, all-or-nothing: see `verifiers/ifbench.py`).

Unsupported prompts: a prompt with a constraint whose check needs NLTK data this machine
lacks (`verifiers.ifbench.NLTK_DATA`; the data is not on PyPI) is skipped when tasks are
generated; `skipped()` counts them, by missing resource (29 of 294 where no NLTK data is
installed). They come back once the data is installed under an `nltk.data.path` folder.

Content-free prompts: IFBench's checkers test form only, and many accept an answer with
no content at all (`format:sub-bullets` passes any text without a `*`, `format:list` any
text with two `-`; "Yes." meets the constraints of 86 of the 265 supported prompts). Such
a task pays a policy for nothing, so by default (`drop_vacuous=True`) a prompt is dropped,
and counted in `skipped()["vacuous"]`, when the PACKAGE's checker accepts one of
`CONTENT_FREE` (a refusal, "Yes.", a filler paragraph, 500 numbers, a list of placeholder
items) or the prompt echoed: 121 of 265, leaving 144. This filters the data; it does not
fix the checkers: a policy can still meet a weak constraint while ignoring the request
(IFBench's RLVR recipe pairs the constraint reward with a preference reward for that).

Splits: as `math500` (`tasks/mmath.py`): a stable hash of the prompt key holds out
`heldout_frac` of the prompts; seeds >= 10_000 draw the held-out split, smaller ones the
train split; `split=` forces one.

Oracle: IFBench ships no reference answers, only one model's responses
(`data/sample_output.jsonl`). A task's oracle is that response when the package's own
strict checker (`evaluation_lib.test_instruction_following_strict`) accepts it (22 of
the 144 kept), else None: answers for 57 constraint types are not written by program
here; `posttrain tasks check` checks the tasks that have one and counts the rest.
`wrong_answer` is the first of a few non-answers (a refusal, the prompt echoed, the
reference cut in half, upper-cased) that the package's checker rejects. Counts quoted
here: benchmarks/benchmark_domains.py.
"""

from __future__ import annotations

import copy
import json
import random
from functools import lru_cache

from posttrain.errors import ConfigError
from posttrain.registry import domain
from posttrain.tasks.mmath import EVAL_SEED, held_out
from posttrain.types import Limits, Message, Spec, Task, thaw
from posttrain.tasks.ifbench_package import is_missing_data


FILLER = ("The weather was mild and the streets were quiet that morning. People walked to work, shops opened "
          "their doors and the buses ran on time. Nothing in particular happened, and by noon the town had settled "
          "into its usual rhythm. In the afternoon a light rain fell, then cleared before evening. Dinner was simple, "
          "and the night passed without any news worth telling. The next day began much the same way.")
LIST = "\n".join(f"{m} item" for m in "---***") + "\n1. item\n2. item"
CONTENT_FREE = ("I'm sorry, but I can't help with that.", "Yes.", FILLER, " ".join(str(i) for i in range(1, 501)), LIST)


def _data(name: str) -> list[dict]:
    from importlib.resources import files

    with (files("ifbench") / "data" / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@lru_cache(maxsize=1)
def load_prompts() -> tuple[dict, ...]:
    from posttrain.tasks.ifbench_package import require_ifbench

    require_ifbench()
    return tuple(_data("IFBench_test.jsonl"))


@lru_cache(maxsize=1)
def sample_responses() -> dict[str, str]:
    """prompt -> the package's sample model response."""
    return {r["prompt"]: r["response"] for r in _data("sample_output.jsonl")}


def package_strict(row: dict, response: str) -> bool:
    """The package's own strict verdict (evaluation_lib), on a copy (it edits kwargs in place).

    A checker that raises on the text (some do: `QuoteExplanationChecker` on an all-digit
    answer) would stop the package's run; here the text does not follow the prompt."""
    from posttrain.tasks.ifbench_package import registry

    registry()  # the offline import
    import ifbench.evaluation_lib as lib

    inp = lib.InputExample(row["key"], list(row["instruction_id_list"]), row["prompt"], copy.deepcopy(list(row["kwargs"])))
    try:
        return lib.test_instruction_following_strict(inp, {row["prompt"]: response}).follow_all_instructions
    except Exception as e:  # noqa: BLE001  see the docstring
        if is_missing_data(e):
            raise
        return False


@lru_cache(maxsize=1)
def _oracles() -> dict[str, str]:
    out = {}
    for row in load_prompts():
        resp = sample_responses().get(row["prompt"])
        if resp and _supported(row) and package_strict(row, resp):
            out[row["key"]] = resp
    return out


def _supported(row: dict) -> bool:
    from posttrain.tasks.ifbench_package import missing_data

    return not missing_data(row["instruction_id_list"])


@lru_cache(maxsize=None)
def is_vacuous(key: str) -> bool:
    """Whether the package's strict checker accepts a content-free answer for prompt `key` (module doc)."""
    row = next(r for r in load_prompts() if r["key"] == key)
    return any(package_strict(row, text) for text in CONTENT_FREE + (row["prompt"],))


@domain("ifbench")
class IFBenchDomain:
    name = "ifbench"

    def __init__(self, heldout_frac: float = 0.5, split: str = "auto", mode: str = "strict", partial: bool = False,
                 drop_vacuous: bool = True, max_new_tokens: int = 2048, timeout_s: float = 60.0) -> None:
        if split not in ("auto", "train", "heldout", "all"):
            raise ConfigError(f"ifbench: split must be auto, train, heldout or all, got {split!r}")
        if not 0.0 < heldout_frac < 1.0:
            raise ConfigError(f"ifbench: heldout_frac must be in (0, 1), got {heldout_frac}")
        self.frac, self.split, self.mode, self.partial = heldout_frac, split, mode, partial
        from posttrain.tasks.ifbench_package import require_ifbench

        require_ifbench()  # before any cached load: a one-line ConfigError naming the install
        self.max_new_tokens, self.timeout_s = max_new_tokens, timeout_s
        self.drop_vacuous = drop_vacuous
        self.rows = [r for r in load_prompts() if _supported(r) and not (drop_vacuous and is_vacuous(r["key"]))]

    def skipped(self) -> dict[str, int]:
        """Prompts left out: {"unsupported": missing NLTK data, resource: prompts needing it, "vacuous": n}."""
        from posttrain.tasks.ifbench_package import missing_data

        out: dict[str, int] = {"unsupported": 0, "vacuous": 0}
        for row in load_prompts():
            miss = missing_data(row["instruction_id_list"])
            out["unsupported"] += bool(miss)
            for m in miss:
                out[m] = out.get(m, 0) + 1
            if not miss and self.drop_vacuous and is_vacuous(row["key"]):
                out["vacuous"] += 1
        return out

    def split_rows(self, split: str) -> list[dict]:
        if split == "all":
            return list(self.rows)
        return [r for r in self.rows if held_out(f"IFBench-{r['key']}", self.frac) == (split == "heldout")]

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        split = self.split if self.split != "auto" else ("heldout" if seed >= EVAL_SEED else "train")
        rows = self.split_rows(split)
        random.Random(f"ifbench:{seed}").shuffle(rows)
        oracles = _oracles()
        return [self._task(r, oracles.get(r["key"])) for r in rows[: max(0, n)]]

    def _task(self, row: dict, oracle: str | None) -> Task:
        kwargs = [{k: v for k, v in kw.items() if v is not None} for kw in row["kwargs"]]
        return Task(
            id=f"ifbench-{row['key']}", domain=self.name,
            prompt=(Message("user", row["prompt"]),),
            verifier=Spec("ifbench", {"prompt": row["prompt"], "instruction_id_list": list(row["instruction_id_list"]),
                                      "kwargs": kwargs, "mode": self.mode, "partial": self.partial}),
            difficulty=1.0, limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=self.timeout_s),
            metadata={"key": row["key"], "instructions": list(row["instruction_id_list"]), "answer_format": "long"},
            oracle=oracle,
        )

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        row = next(r for r in load_prompts() if r["key"] == task.metadata["key"])
        ref = task.oracle or sample_responses().get(row["prompt"], "")
        candidates = ["I'm sorry, but I can't help with that.", row["prompt"], ref[: len(ref) // 2], ref.upper(),
                      "\n".join(reversed(ref.splitlines()))]
        for text in candidates:
            if text.strip() and not package_strict(thaw(row), text):
                return text
        return "I'm sorry, but I can't help with that."
