"""`bfcl`: the single-turn Python AST categories of the Berkeley Function Calling Leaderboard v4.

Read from the `bfcl-eval` package's files (`bfcl_eval/data/BFCL_v4_<category>.json` and
`possible_answer/`); nothing is downloaded and nothing of the package is imported. Install:
`pip install --no-deps bfcl-eval==2026.3.23` (its own dependencies pull a CUDA torch).
Without it, building the domain raises a one-line ConfigError; the verifier needs no package
(the ground truth travels in its args), so frozen suites score anywhere.

Categories (`categories=`, a list or a comma-separated string; default `DEFAULT`): simple
(BFCL's `simple_python`), multiple, parallel, parallel_multiple, their `live_*` versions,
irrelevance and live_irrelevance (the right reply calls nothing). Java/JavaScript (values
written as source strings that BFCL parses with its own converters), live_relevance (no
ground truth), multi-turn, web_search and memory (live backends) are left out.
Items whose first allowed values fail BFCL's own checker (`usable`) are left out too.

Splits: an item belongs to the held-out split when a stable hash of its id falls under
`heldout_frac` (sha256, not Python's salted `hash`), else to train; the two never share
an item. `generate(n, seed)` returns items of one split in a seeded order: held-out when
`seed >= SPLIT_SEED` (10_000, the default `tasks.eval_seed`, so `make_splits` draws
held-out tasks from `eval_seed + seed` and train from `seed`), train otherwise; at most
the split's size. (`generate_split`'s retries add 7919 per attempt to the seed: they only
happen when `n` exceeds the split, and the third could reach the other split's items.)
`difficulty` is ignored; each task records its category's (0 simple .. 3 parallel_multiple).

Prompt: a system message with the tools rendered as Qwen/Hermes chat templates render
them (OpenAI function JSON, one per line in `<tools>`, BFCL types cast to JSON Schema as
BFCL casts them) and the project's call format (`rollout/agent/toolcall.py`); then the item's
own messages. Oracle: one `<tool_call>` per expected call, each argument at its first
allowed value (left out where that is "omitted"); a plain sentence for irrelevance.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from posttrain.errors import ConfigError
from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task, thaw

PACKAGE, PIN = "bfcl-eval", "2026.3.23"
INSTALL = f"pip install --no-deps {PACKAGE}=={PIN}"
CALLS = ("simple", "multiple", "parallel", "parallel_multiple",
         "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
ABSTAIN = ("irrelevance", "live_irrelevance")
DEFAULT = CALLS + ABSTAIN
FILES = {"simple": "simple_python"}  # our name -> BFCL's file stem, where they differ
LEVEL = {"simple": 0.0, "multiple": 1.0, "parallel": 2.0, "parallel_multiple": 3.0, "irrelevance": 1.0}
SPLIT_SEED = 10_000
OPENAPI = {"integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
           "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
           "tuple": "array", "any": "string"}  # BFCL's GORILLA_TO_OPENAPI, Python types
NO_CALL = "None of the available functions can do this, so I will not call any of them."
SYSTEM = ("You are an expert in composing functions. You are given a question and a set of possible functions. "
          "Based on the question, make one or more function calls to achieve the purpose. If none of the functions "
          "can be used, say so in plain words and call nothing. If the question lacks the parameters a function "
          "requires, point it out.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
          "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
          "For each function call, return a json object with function name and arguments within "
          "<tool_call></tool_call> XML tags:\n<tool_call>{{\"name\": <function-name>, \"arguments\": "
          "<args-json-object>}}</tool_call>\nWrite one such block per call and nothing after the last one.")


def data_dir() -> Path:
    """`bfcl_eval/data` of the installed package, found without importing the package."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise ConfigError(f"domain bfcl needs the {PACKAGE} package: {INSTALL}")
    d = Path(spec.origin).parent / "data"
    if not d.is_dir():
        raise ConfigError(f"domain bfcl: {d} is missing (reinstall: {INSTALL})")
    return d


def _lines(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@lru_cache(maxsize=None)
def load_category(category: str) -> tuple[dict, ...]:
    """The items of one category, each with its `ground_truth` (`[]` for irrelevance)."""
    if category not in DEFAULT:
        raise ConfigError(f"domain bfcl: unknown category {category!r}; known: {', '.join(DEFAULT)}")
    d, stem = data_dir(), f"BFCL_v4_{FILES.get(category, category)}.json"
    items = _lines(d / stem)
    answers = {} if category in ABSTAIN else {a["id"]: a["ground_truth"] for a in _lines(d / "possible_answer" / stem)}
    return tuple({**it, "category": category, "ground_truth": answers.get(it["id"], [])} for it in items)


def _openapi(schema: Any) -> Any:
    """A BFCL parameter schema as JSON Schema (types cast as BFCL's `_cast_to_openai_type`)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k not in ("properties", "items")}
    if "type" in schema:
        out["type"] = OPENAPI.get(schema["type"], "string")
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: _openapi(v) for k, v in schema["properties"].items()}
    if "items" in schema:
        out["items"] = _openapi(schema["items"])
    return out


def render_tools(functions: Sequence[dict]) -> str:
    """One OpenAI function JSON per line, as `tojson` in a Qwen/Hermes chat template writes them."""
    rows = []
    for f in functions:
        fn = copy.deepcopy(f)
        fn["description"] = fn.get("description", "") + " Note that the provided function is in Python 3 syntax."
        params = _openapi(fn.get("parameters", {}))
        params["type"] = "object"
        rows.append(json.dumps({"type": "function", "function": {**fn, "parameters": params}}, ensure_ascii=False))
    return "\n".join(rows)


def format_tool_call(name: str, arguments: dict) -> str:
    from posttrain.tasks.bfcl_judge import format_call

    return format_call(name, arguments)


def _omitted(v: Any) -> bool:
    return type(v) is str and v == ""


def _concrete(value: Any) -> Any:
    """An allowed value made concrete: dicts in the ground truth map keys to allowed lists."""
    if isinstance(value, dict):
        out = {}
        for k, opts in value.items():
            pick = next((o for o in opts if not _omitted(o)), None) if isinstance(opts, list) else opts
            if pick is not None or (isinstance(opts, list) and None in opts):
                out[k] = _concrete(pick)
        return out
    if isinstance(value, list):
        return [_concrete(x) for x in value]
    return value


def oracle_calls(ground_truth: Sequence[dict], functions: Sequence[dict] = ()) -> list[tuple[str, dict]]:
    """(name, arguments) per expected call: each argument at its first allowed value. An
    argument the function's doc does not declare is left out where it may be (a data slip)."""
    declared = {f["name"]: set(f.get("parameters", {}).get("properties", {})) for f in functions}
    out = []
    for call in ground_truth:
        (name, params), = call.items()
        args = {}
        for p, allowed in params.items():
            picks = [a for a in allowed if not _omitted(a)]
            if name in declared and p not in declared[name] and len(picks) < len(allowed):
                continue
            if picks:
                args[p] = _concrete(picks[0])
        out.append((name, args))
    return out


def oracle_text(item: dict) -> str:
    if item["category"] in ABSTAIN:
        return NO_CALL
    return "\n".join(format_tool_call(n, a) for n, a in oracle_calls(item["ground_truth"], item["function"]))


def usable(item: dict) -> bool:
    """Whether the oracle passes our checker (it mirrors BFCL's): some items cannot be passed."""
    from posttrain.tasks.bfcl_judge import judge

    return judge(oracle_text(item), item["category"], item["function"], item["ground_truth"])[0]


def in_heldout(item_id: str, heldout_frac: float) -> bool:
    h = int(hashlib.sha256(f"bfcl-split:{item_id}".encode()).hexdigest()[:12], 16)
    return h / float(1 << 48) < heldout_frac


def parse_categories(categories: Any) -> tuple[str, ...]:
    names = categories.split(",") if isinstance(categories, str) else list(categories)
    names = [str(c).strip() for c in names if str(c).strip()]
    unknown = [c for c in names if c not in DEFAULT]
    if unknown or not names:
        raise ConfigError(f"domain bfcl: unknown categories {unknown}; known: {', '.join(DEFAULT)}")
    return tuple(dict.fromkeys(names))


def _prompt(item: dict) -> tuple[Message, ...]:
    msgs = item["question"][0]
    head = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
    system = (head + "\n\n" if head else "") + SYSTEM.format(tools=render_tools(item["function"]))
    return (Message("system", system),) + tuple(Message(m["role"], m["content"]) for m in msgs if m["role"] != "system")


def _wrong_args(args: dict, rng: random.Random) -> dict:
    """`args` with one value changed to one no allowed list holds, or one argument dropped."""
    if not args:
        return {"zzq_unknown_arg": 1}
    key = rng.choice(sorted(args))
    v = args[key]
    if rng.random() < 0.3:
        return {k: x for k, x in args.items() if k != key} or {"zzq_unknown_arg": 1}
    if isinstance(v, bool):
        bad: Any = "zzq"
    elif isinstance(v, (int, float)):
        bad = v * 7 + 123457
    elif isinstance(v, str):
        bad = v + " zzq"
    else:
        bad = "zzq"
    return {**args, key: bad}


@domain("bfcl")
class Bfcl:
    """See the module doc. `heldout_frac`: share of items in the held-out split."""

    name = "bfcl"

    def __init__(self, categories: Any = DEFAULT, heldout_frac: float = 0.5, max_new_tokens: int = 512) -> None:
        self.categories = parse_categories(categories)
        if not 0.0 < heldout_frac < 1.0:
            raise ConfigError(f"domain bfcl: heldout_frac must be in (0, 1), got {heldout_frac}")
        self.heldout_frac, self.max_new_tokens = float(heldout_frac), int(max_new_tokens)
        data_dir()  # a missing package fails here, at build time, with the install command

    def items(self, split: str) -> list[dict]:
        """Every usable item of the selected categories in `split` ("train" or "heldout"), file order."""
        want = split == "heldout"
        return [it for c in self.categories for it in load_category(c)
                if in_heldout(it["id"], self.heldout_frac) == want and _usable(c, it["id"])]

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        split = "heldout" if seed >= SPLIT_SEED else "train"
        items = self.items(split)
        random.Random(f"bfcl:{seed}").shuffle(items)
        return [self._task(it, split) for it in items[: max(0, n)]]

    def _task(self, item: dict, split: str) -> Task:
        cat = item["category"]
        verifier = Spec("bfcl", {"category": cat, "functions": item["function"], "ground_truth": item["ground_truth"]})
        return Task(
            id=f"bfcl-{item['id']}", domain=self.name, prompt=_prompt(item), verifier=verifier,
            difficulty=LEVEL.get(cat.removeprefix("live_"), 0.0),
            limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=30.0),
            metadata={"bfcl_id": item["id"], "category": cat, "split": split, "answer_format": "text",
                      "functions": [f["name"] for f in item["function"]]},
            oracle=oracle_text(item),
        )

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        """A plausible miss: one value changed, one argument or call dropped, another function
        called; for irrelevance, a call to an offered function. Always one the checker rejects."""
        from posttrain.tasks.bfcl_judge import judge

        args = thaw(task.verifier.args)  # the task carries its item: no package needed here
        item = {"category": args["category"], "function": args["functions"], "ground_truth": args["ground_truth"]}
        names = [f["name"] for f in item["function"]]
        if item["category"] in ABSTAIN:
            return format_tool_call(rng.choice(names or ["search"]), {})  # some items offer no function
        calls = oracle_calls(item["ground_truth"], item["function"])
        for _ in range(8):
            bad = [(n, dict(a)) for n, a in calls]
            i = rng.randrange(len(bad))
            r = rng.random()
            if len(bad) > 1 and r < 0.25:
                bad.pop(i)
            elif len(names) > 1 and r < 0.5:
                bad[i] = (rng.choice([x for x in names if x != bad[i][0]] or names), bad[i][1])
            else:
                bad[i] = (bad[i][0], _wrong_args(bad[i][1], rng))
            text = "\n".join(format_tool_call(n, a) for n, a in bad)
            if not judge(text, item["category"], item["function"], item["ground_truth"])[0]:
                return text
        return NO_CALL  # a call category with no call: always wrong


@lru_cache(maxsize=None)
def _index(category: str) -> dict[str, dict]:
    return {it["id"]: it for it in load_category(category)}


def _item(category: str, item_id: str) -> dict:
    return _index(category)[item_id]


@lru_cache(maxsize=None)
def _usable(category: str, item_id: str) -> bool:
    return usable(_item(category, item_id))


def counts(categories: Any = DEFAULT, heldout_frac: float = 0.5) -> dict[str, dict[str, int]]:
    """Usable items per category and split, plus the items left out as unpassable."""
    out: dict[str, dict[str, int]] = {}
    for c in parse_categories(categories):
        row = {"train": 0, "heldout": 0, "unusable": 0}
        for it in load_category(c):
            if not _usable(c, it["id"]):
                row["unusable"] += 1
            else:
                row["heldout" if in_heldout(it["id"], heldout_frac) else "train"] += 1
        out[c] = row
    return out
