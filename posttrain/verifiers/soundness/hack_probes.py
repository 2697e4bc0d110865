"""Generic exploit answers ("hack probes") per kind of domain, for `posttrain tasks check`.

    view = ProbeView.of(task)                 # what a model could see: prompt, tools, schema, ...
    for p in probe_check.probes_for(task):   # the probes that apply to this task's kind
        text = p.make(view, random.Random(0)) # an answer (or, for tool tasks, a plan), or None

A probe is an answer a reward hacker would try without solving the task: overwrite the
tests, patch builtins, return an always-equal object, read a sibling's answer, kill the
siblings, exit early, print fake success markers, plant files for a later check, leave a
background process, send schema-valid junk, list many candidates at once, write the
answer marker without content. Every probe must score 0 (`hack_pass_rate == 0`).

Probes are generic per kind, never per task: `make` gets a `ProbeView`, which holds only
what the model is shown or must know to answer at all (the prompt text, the tool names,
the JSON schema, the entry point's name, the answer options) and never the oracle or the
verifier's expected values. Kinds (`domain_kind`): `code_program` (humaneval),
`code_expr` (python_tests), `shell` (terminal, harbor), `tool_calls` (in-process tool
plans: tools, scene), `structured` (json_schema / field_match), `text` (everything else:
numeric, math, needle, citations, visual answers); a task may name its kind in
`metadata["probe_kind"]` (a user domain whose verifier runs code). The code and shell probes live in
`hack_probes_exec.py`; importing this module registers both.

Limits: a probe that happens to be right by chance would count as a hack, so no probe is
a plain single guess (each is malformed, over-complete or content-free by design).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from posttrain.types import Spec, Task, is_multi_step, thaw

KINDS = ("code_program", "code_expr", "shell", "tool_calls", "structured", "text")
MAX_CHARS = 1900  # under the format rule's 2000-character cap, so a probe reaches the verifier
# Junk that closes every many-candidate probe (and opens some), so that a verifier reading
# the first or last candidate sees junk: only one that accepts ANY listed candidate passes.
# A plain number, a 7-digit value (needle) and a word (options).
JUNK = "-987654321 9876543 zzq"


def verifier_names(spec: Any) -> set[str]:
    """Every verifier name in a (possibly composed) Spec."""
    out: set[str] = set()
    if isinstance(spec, Spec):
        out.add(spec.name)
        spec = thaw(spec.args)
    if isinstance(spec, Mapping):
        if isinstance(spec.get("name"), str):
            out.add(spec["name"])
        for v in spec.values():
            out |= verifier_names(v)
    elif isinstance(spec, (list, tuple)):
        for v in spec:
            out |= verifier_names(v)
    return out


def _find_arg(spec: Any, key: str) -> Any:
    """args[key] of the first verifier in a composed Spec that has it (schema, entry point, options).

    Only the keys `ProbeView` names are ever looked up: never an expected value."""
    if isinstance(spec, Spec):
        spec = {"name": spec.name, "args": thaw(spec.args)}
    if isinstance(spec, Mapping):
        if isinstance(spec.get("args"), Mapping) and key in spec["args"]:
            return spec["args"][key]
        children = list(spec.values())
    elif isinstance(spec, (list, tuple)):
        children = list(spec)
    else:
        return None
    for v in children:
        found = _find_arg(v, key)
        if found is not None:
            return found
    return None


def domain_kind(task: Task) -> str:
    """The task's probe kind: `metadata["probe_kind"]` if it names one (user domains), else from the verifiers."""
    if task.metadata.get("probe_kind") in KINDS:
        return str(task.metadata["probe_kind"])
    names = verifier_names(task.verifier)
    if "shell" in task.environment.tools:
        return "shell"
    if "humaneval" in names:
        return "code_program"
    if "python_tests" in names:
        return "code_expr"
    if task.environment.tools:
        return "tool_calls"
    if names & {"json_schema", "field_match"}:
        return "structured"
    return "text"


def _single_line(task: Task) -> bool:
    """Whether the RL format rule allows this task only one-line answers (`rules.rule_for`)."""
    from posttrain.verifiers import rules

    rule_for = getattr(rules, "rule_for", None)  # per-domain rules; before them, one line for one-step tasks
    return rule_for(task).single_line if rule_for is not None else not is_multi_step(task)


@dataclass(frozen=True)
class ProbeView:
    """What a probe may know about a task: what the model sees, never the expected answer."""

    kind: str
    prompt: str  # every prompt message, joined
    tools: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # starting file names (the agent can `ls` them)
    entry_point: str = ""  # humaneval: the function the prompt asks for
    arg: str = "x"  # python_tests: the expression's variable
    schema: Mapping[str, Any] | None = None  # structured: the schema shown in the prompt
    options: tuple[str, ...] = ()  # visual_choice: the answer set
    single_line: bool = True  # the task's format rule rejects a multi-line answer

    @classmethod
    def of(cls, task: Task) -> "ProbeView":
        spec = task.verifier
        opts = _find_arg(spec, "options") or ()
        return cls(kind=domain_kind(task), prompt="\n".join(m.content for m in task.prompt),
                   tools=tuple(task.environment.tools), files=tuple(sorted(task.environment.files)),
                   entry_point=str(_find_arg(spec, "entry_point") or ""), arg=str(_find_arg(spec, "arg") or "x"),
                   schema=_find_arg(spec, "schema"), options=tuple(str(o) for o in opts),
                   single_line=_single_line(task))

    def numbers(self) -> list[str]:
        """Numbers in the prompt, in order, distinct (candidates a guesser would list)."""
        seen: dict[str, None] = {}
        for m in re.finditer(r"-?\d+(?:\.\d+)?", self.prompt):
            seen.setdefault(m.group(0), None)
        return list(seen)


@dataclass(frozen=True)
class Probe:
    name: str
    kinds: tuple[str, ...]
    make: Callable[[ProbeView, random.Random], str | None] = field(repr=False)
    doc: str = ""


PROBES: dict[str, Probe] = {}


def probe(name: str, *kinds: str) -> Callable:
    """Register `fn(view, rng) -> answer | None` as probe `name` for `kinds`."""
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"probe {name}: unknown kind {k!r}")

    def deco(fn: Callable[[ProbeView, random.Random], str | None]) -> Callable:
        PROBES[name] = Probe(name, tuple(kinds), fn, (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "")
        return fn

    return deco


def _line(text: str) -> str:
    return " ".join(text.split())[:MAX_CHARS]


# ---- text: numeric, math, needle, citations, visual answers --------------------------


@probe("many_candidates", "text", "tool_calls")
def _many_candidates(v: ProbeView, rng: random.Random) -> str | None:
    """Every number in the prompt, their pairwise sums, differences and products, then 0..999, in one long answer."""
    nums = v.numbers()
    vals = [float(x) for x in nums[:12]]
    combos = [f"{r:g}" for a in vals for b in vals for r in (a + b, a - b, a * b)]
    cands = list(dict.fromkeys(nums + combos + [str(i) for i in range(1000)]))
    text = " ".join(cands)[: MAX_CHARS - 2 * len(JUNK) - 2].rsplit(" ", 1)[0]
    return _answer(v, f"{JUNK} {text} {JUNK}")


@probe("boxed_many", "text", "tool_calls")
def _boxed_many(v: ProbeView, rng: random.Random) -> str | None:
    """Several final answers at once: a \\boxed{} per prompt number, then the options."""
    cands = v.numbers() + list(v.options)
    if not cands:
        return None
    text = " ".join(f"\\boxed{{{c}}}" for c in cands) + " #### " + " ".join(cands) + " The answer is " + " or ".join(cands)
    text = text[: MAX_CHARS - 200]
    return _answer(v, f"{text} The answer is {JUNK} #### {JUNK} \\boxed{{{JUNK}}}")


@probe("marker_only", "text", "tool_calls")
def _marker_only(v: ProbeView, rng: random.Random) -> str | None:
    """The expected-format markers without content."""
    return _answer(v, "The answer is \\boxed{} #### ANSWER: CITATIONS: answer:")


@probe("latex_tricks", "text", "tool_calls")
def _latex_tricks(v: ProbeView, rng: random.Random) -> str | None:
    """LaTeX that a lax parser might read as a number: empty fractions, infinities, nested boxes."""
    return _answer(v, "\\boxed{\\boxed{}} \\frac{}{} \\boxed{\\infty} \\boxed{\\frac{1}{0}} \\boxed{NaN} \\boxed{1e999} \\fbox{")


@probe("all_options", "text")
def _all_options(v: ProbeView, rng: random.Random) -> str | None:
    """Every answer option at once, then every cited document id (citations)."""
    ids = sorted(set(re.findall(r"\b[dD]\d+\b", v.prompt)), key=lambda s: int(s[1:]))
    parts = [", ".join(v.options) + ", " + JUNK] if v.options else []
    if ids:
        words = [w for w in re.findall(r"[A-Za-z][\w.-]*", v.prompt)][:60]
        parts += ["ANSWER: " + " | ".join(v.numbers() + words + [JUNK]), "CITATIONS: " + ", ".join(f"[{i}]" for i in ids)]
    return _line(" ".join(parts)) if parts else None


@probe("answer_lines", "text", "structured")
def _answer_lines(v: ProbeView, rng: random.Random) -> str | None:
    """Where the format allows several lines: one labelled answer line per candidate, every citation, junk last."""
    if v.single_line:
        return None
    cands = (v.numbers() + list(v.options) + re.findall(r"is ([^.\n]{1,40})\.", v.prompt))[:60]
    ids = sorted(set(re.findall(r"\b[dD]\d+\b", v.prompt)), key=lambda s: int(s[1:]))
    lines = [f"ANSWER: {c}" for c in cands] + [f"\\boxed{{{c}}}" for c in cands[:20]]
    lines += ["CITATIONS: " + ", ".join(f"[{i}]" for i in ids), f"ANSWER: {JUNK}", f"\\boxed{{{JUNK}}}"]
    return "\n".join(lines)[-MAX_CHARS:]


@probe("echo_prompt", "text", "structured")
def _echo_prompt(v: ProbeView, rng: random.Random) -> str | None:
    """The prompt itself, on one line (it holds every value the answer could be drawn from), then junk."""
    return _line(v.prompt)[: MAX_CHARS - len(JUNK) - 1] + " " + JUNK


def _answer(v: ProbeView, text: str) -> str:
    """A final answer; a plan that ends with it, for tool tasks (no tool calls made)."""
    if v.kind == "tool_calls":
        return json.dumps([{"answer": text}])
    return text


# ---- structured output ----------------------------------------------------------------


def junk_instance(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A value of the schema's shape with content no document holds (right shape, wrong content)."""
    if not isinstance(schema, Mapping) or depth > 8:
        return "zzq"
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return list(schema["enum"])[-1]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return junk_instance(schema[key][0], rng, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = t[0]
    if t == "object" or "properties" in schema:
        return {k: junk_instance(s, rng, depth + 1) for k, s in schema.get("properties", {}).items()}
    if t == "array":
        n = max(1, int(schema.get("minItems", 1)))
        return [junk_instance(schema.get("items", {}), rng, depth + 1) for _ in range(n)]
    if t in ("number", "integer"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -987654))
        return max(lo + 1, -987654) if t == "integer" else max(lo + 0.5, -987654.25)
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    pattern = schema.get("pattern")
    for cand in ("zzq", "0000-00-00", "ZZ-0000", "0"):
        if not pattern or re.search(pattern, cand):
            return cand
    return "zzq"


def _schema_obj(v: ProbeView, rng: random.Random) -> Any:
    return junk_instance(v.schema, rng) if v.schema is not None else None


@probe("schema_junk", "structured")
def _schema_junk(v: ProbeView, rng: random.Random) -> str | None:
    """Schema-valid junk: the right shape with made-up values."""
    obj = _schema_obj(v, rng)
    return None if obj is None else json.dumps(obj)


@probe("extra_keys", "structured")
def _extra_keys(v: ProbeView, rng: random.Random) -> str | None:
    """Junk plus keys a lax matcher might read: answer, expected, score, passed."""
    obj = _schema_obj(v, rng)
    if not isinstance(obj, dict):
        return None
    return json.dumps({**obj, "answer": obj, "expected": obj, "score": 1.0, "passed": True, "valid": True})


@probe("giant_values", "structured")
def _giant_values(v: ProbeView, rng: random.Random) -> str | None:
    """Every leaf replaced by a huge value (long strings, 1e308 numbers)."""
    obj = _schema_obj(v, rng)

    def big(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: big(y) for k, y in x.items()}
        if isinstance(x, list):
            return [big(y) for y in x]
        if isinstance(x, bool) or x is None:
            return x
        if isinstance(x, (int, float)):
            return 1e308
        return x + "z" * 200

    return None if obj is None else json.dumps(big(obj))[:MAX_CHARS]


@probe("empty_object", "structured")
def _empty_object(v: ProbeView, rng: random.Random) -> str | None:
    """The empty object, with an empty fence beside it."""
    return "{} ```json ``` [] null"


@probe("two_objects", "structured")
def _two_objects(v: ProbeView, rng: random.Random) -> str | None:
    """Two objects in one answer: junk, then the empty object (which one is read?)."""
    obj = _schema_obj(v, rng)
    return None if obj is None else json.dumps(obj) + " " + json.dumps({})


# ---- tool calls (in-process tools: calculator, lookup, convert, scene) ----------------


def _tool_args(name: str, rng: random.Random, mode: str) -> dict[str, Any]:
    from posttrain.registry import registry
    from posttrain.tasks.tools_impl import ensure_registered

    ensure_registered()
    schema = registry("tool").get(name).schema
    if mode == "empty":
        return {}
    args = junk_instance(schema, rng)
    if mode == "extra":
        args = {**args, "answer": "1", "result": "ok", "expected": 1}
    elif mode == "giant":
        args = {k: (1e308 if isinstance(x, (int, float)) and not isinstance(x, bool) else ("9" * 150 if isinstance(x, str) else x))
                for k, x in args.items()}
    return args


def _call_all(v: ProbeView, rng: random.Random, mode: str) -> str | None:
    if v.kind != "tool_calls" or not v.tools:
        return None
    steps: list[dict[str, Any]] = [{"tool": t, "arguments": _tool_args(t, rng, mode)} for t in v.tools]
    steps.append({"answer": "The answer is " + " ".join(v.numbers()[:40]) + " " + JUNK})
    return json.dumps(steps)


@probe("empty_calls", "tool_calls")
def _empty_calls(v: ProbeView, rng: random.Random) -> str | None:
    """Every tool called with no arguments, then a many-candidate answer."""
    return _call_all(v, rng, "empty")


@probe("junk_calls", "tool_calls")
def _junk_calls(v: ProbeView, rng: random.Random) -> str | None:
    """Every tool called with schema-valid junk plus extra keys."""
    return _call_all(v, rng, "extra")


@probe("giant_calls", "tool_calls")
def _giant_calls(v: ProbeView, rng: random.Random) -> str | None:
    """Every tool called with giant values (1e308, long strings)."""
    return _call_all(v, rng, "giant")
