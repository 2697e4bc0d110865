"""`bfcl`: BFCL v4 items as tasks, and a verifier that agrees with BFCL's own AST checker.

Tests that read the data need `bfcl-eval` (`pip install --no-deps bfcl-eval==2026.3.23`)
and skip without it; the missing-package error and the verifier's parsing run anywhere.
"""

import asyncio
import copy
import json
import random
import subprocess
import sys
import types

import pytest

from posttrain.errors import ConfigError
from posttrain.types import Task, Trajectory, Turn
from posttrain.tasks.bfcl_judge import CallParseError, is_plain_reply, judge, parse_calls

HAVE_BFCL = __import__("importlib").util.find_spec("bfcl_eval") is not None
needs_bfcl = pytest.mark.skipif(not HAVE_BFCL, reason="bfcl-eval not installed")


def call(fn, args=None, **kw):
    return f'<tool_call>{json.dumps({"name": fn, "arguments": {**(args or {}), **kw}})}</tool_call>'


# ---- registration and the missing package --------------------------------------------


def test_domain_and_verifier_register_from_a_fresh_interpreter():
    code = ("from posttrain.builtins import load_builtins; load_builtins(); "  # the one call the CLI makes
            "from posttrain.registry import registry; registry('domain').get('bfcl'); "
            "registry('verifier').get('bfcl'); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_missing_package_is_a_one_line_config_error_naming_the_install(monkeypatch):
    from posttrain.registry import build

    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # import of bfcl_eval now fails
    with pytest.raises(ConfigError) as e:
        build("bfcl", kind="domain")
    msg = str(e.value)
    assert "\n" not in msg and "bfcl-eval" in msg and "pip install --no-deps bfcl-eval==2026.3.23" in msg


def test_markers_are_the_projects_tool_call_markers():
    from posttrain.rollout.agent import toolcall
    from posttrain.tasks import bfcl_judge as bfcl

    assert (bfcl.OPEN, bfcl.CLOSE) == (toolcall.OPEN, toolcall.CLOSE)
    assert bfcl.format_call("f", {"a": 1}) == toolcall.format_tool_call("f", {"a": 1})


# ---- parsing: strict about what counts as a call ----------------------------------------


def test_parse_reads_the_three_forms_and_the_parameters_spelling():
    want = [{"f": {"a": 1}}, {"g": {}}]
    assert parse_calls(call("f", a=1) + "\n" + call("g")) == want
    assert parse_calls('Sure.\n```json\n[{"name": "f", "arguments": {"a": 1}}, {"name": "g"}]\n```') == want
    assert parse_calls('[{"name": "f", "parameters": {"a": 1}}, {"name": "g", "arguments": "{}"}]') == want
    assert parse_calls("I cannot help with that.") == []


@pytest.mark.parametrize("text", [
    call("f", a=1) + " done",                                   # text after the last call
    call("f", a=1) + " and " + call("g"),                        # text between calls
    "<tool_call>" + '{"name": "f", "arguments": {"a": 1}}',      # unterminated
    '<tool_call>{"name": "f", "arguments": {"a": 1}, "score": 1}</tool_call>',  # extra key
    '<tool_call>{"name": "f", "name": "g", "arguments": {}}</tool_call>',        # duplicate key
    '<tool_call>{"name": "f", "arguments": {"a": NaN}}</tool_call>',             # not JSON
    '<tool_call>{"name": "f", "arguments": {}, "parameters": {}}</tool_call>',
    '```json\n{"name": "f", "arguments": {}}\n``` and ```json\n{}\n```',       # two fences
    '```json\n{"name": "f", "arguments": {}}\n```\nHope this helps!',          # text after the fence
    call("f") + '\n```json\n{"name": "f"}\n```',                               # a mix of forms
    '[]', '[1, 2]', '{"name": ""}', '{"name": "f", "arguments": [1]}',
])
def test_malformed_calls_are_refused(text):
    with pytest.raises(CallParseError):
        parse_calls(text)


@pytest.mark.parametrize("text,plain", [
    ("None of these functions can answer that.", True),
    ("I cannot do that {sorry}", False), ("[]", False), ("```\nnothing\n```", False),
    (call("f"), False), ("x" * 601, False), ("   ", False),
])
def test_plain_reply_means_no_call_and_nothing_like_one(text, plain):
    assert is_plain_reply(text) is plain


# ---- the checker on hand-made items --------------------------------------------------

DOCS = [{"name": "area", "description": "", "parameters": {"type": "dict", "required": ["base"], "properties": {
    "base": {"type": "integer"}, "unit": {"type": "string"}, "scale": {"type": "float"},
    "tags": {"type": "array", "items": {"type": "string"}}}}},
        {"name": "other", "description": "", "parameters": {"type": "dict", "required": [], "properties": {}}}]
GT = [{"area": {"base": [10], "unit": ["cm", ""], "scale": [2.0, ""], "tags": [["a b"], ""]}}]
PAR_GT = [{"area": {"base": [1], "unit": [""], "scale": [""], "tags": [""]}},
          {"area": {"base": [2], "unit": [""], "scale": [""], "tags": [""]}}]


@pytest.mark.parametrize("text,ok", [
    (call("area", base=10), True),
    (call("area", base=10, unit="CM", scale=2, tags=["A-B"]), True),  # BFCL's string rule; int for a float
    (call("area", base=10.0), False),                                  # float for an integer
    (call("area", base=True), False),                                  # a bool is no int
    (call("area", base="10"), False),
    (call("area", base=11), False),
    (call("area", unit="cm"), False),                                  # required arg missing
    (call("area", base=10, color="red"), False),                       # unknown arg
    (call("other"), False),
    (call("area", base=10) + "\n" + call("area", base=10), False),      # duplicated call
    (call("area", base=10) + "\n" + call("other"), False),              # an extra call
    (call("area", base=10, unit="cm" * 500), False),                   # giant value
])
def test_simple_item_rules(text, ok):
    assert judge(text, "simple", DOCS, GT)[0] is ok


def test_parallel_calls_match_in_any_order_but_not_twice():
    a, b = call("area", base=1), call("area", base=2)
    assert judge(a + b, "parallel", DOCS[:1], PAR_GT)[0] and judge(b + "\n" + a, "parallel", DOCS[:1], PAR_GT)[0]
    assert not judge(a + a, "parallel", DOCS[:1], PAR_GT)[0]
    assert not judge(a + b + b, "parallel", DOCS[:1], PAR_GT)[0]
    assert not judge(a, "parallel", DOCS[:1], PAR_GT)[0]


def test_irrelevance_passes_only_a_plain_reply():
    assert judge("No function fits this request.", "irrelevance", DOCS, [])[0]
    for text in (call("other"), '{"name": "other"}', "<tool_call>broken", "", "1 " * 400):
        assert not judge(text, "irrelevance", DOCS, [])[0]


# ---- the domain -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dom():
    if not HAVE_BFCL:
        pytest.skip("bfcl-eval not installed")
    from posttrain.registry import build

    return build("bfcl", kind="domain")


@pytest.fixture(scope="module")
def every_task(dom):
    return dom.generate(10**6, 0) + dom.generate(10**6, 10_000)


@needs_bfcl
def test_splits_never_share_an_item_and_seeds_pick_the_split(dom, every_task):
    from posttrain.tasks.bfcl import counts

    train = {t.id for t in every_task if t.metadata["split"] == "train"}
    held = {t.id for t in every_task if t.metadata["split"] == "heldout"}
    assert train and held and not train & held and len(train) + len(held) == len(every_task)
    assert {t.id for t in dom.generate(10**6, 0)} == train and {t.id for t in dom.generate(10**6, 10_000)} == held
    assert {t.id for t in dom.generate(200, 3)} <= train and {t.id for t in dom.generate(200, 10_007)} <= held
    c = counts()
    assert len(train) == sum(r["train"] for r in c.values()) and len(held) == sum(r["heldout"] for r in c.values())
    assert [t.version for t in dom.generate(30, 5)] == [t.version for t in dom.generate(30, 5)]


@needs_bfcl
def test_run_config_splits_draw_heldout_and_train_from_their_own_partitions():
    from posttrain.config import load_config
    from posttrain.tasks.splits import make_splits

    domains = {"bfcl": {"n_train": 250, "n_eval": 100, "args": {"categories": "simple,multiple"}}}
    splits = make_splits(load_config(None, base={"tasks": {"domains": domains}}))
    train, held = splits.train, splits.held_out
    assert len(held) == 100 and len(train) == 250
    assert {t.metadata["split"] for t in held} == {"heldout"} and {t.metadata["split"] for t in train} == {"train"}
    assert not {t.metadata["bfcl_id"] for t in held} & {t.metadata["bfcl_id"] for t in train}


@needs_bfcl
def test_categories_are_selected_by_the_domain_arg():
    from posttrain.registry import build

    tasks = build("bfcl", kind="domain", categories="parallel, live_irrelevance").generate(10**6, 0)
    assert {t.metadata["category"] for t in tasks} == {"parallel", "live_irrelevance"}
    with pytest.raises(ConfigError):
        build("bfcl", kind="domain", categories=["simple", "web_search"])


@needs_bfcl
def test_prompt_renders_the_functions_as_json_schema_tools(dom):
    t = next(t for t in dom.generate(10**6, 0) if t.metadata["category"] == "parallel_multiple")
    system = t.prompt[0].content
    tools = [json.loads(line) for line in system.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert [x["function"]["name"] for x in tools] == list(t.metadata["functions"])
    blob = json.dumps(tools)
    assert all(x["function"]["parameters"]["type"] == "object" for x in tools)
    assert '"type": "dict"' not in blob and '"type": "float"' not in blob
    assert "<tool_call>" in system and t.prompt[-1].role == "user"


@needs_bfcl
def test_every_oracle_scores_1_and_every_wrong_answer_0(dom, every_task):
    for t in every_task:
        args = dict(t.verifier.args)
        assert judge(t.oracle, args["category"], args["functions"], args["ground_truth"])[0], t.id
        wrong = dom.wrong_answer(t, random.Random(t.id))
        assert not judge(wrong, args["category"], args["functions"], args["ground_truth"])[0], t.id


def _score(task: Task, texts: list[str]) -> list[float]:
    from posttrain.verifiers.run import VerifierRunner

    trajs = [Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", x),) if x else (), sample=i,
                        finish_reason="stop") for i, x in enumerate(texts)]
    out = asyncio.run(VerifierRunner(None).verify_all({task.id: task}, trajs))
    return [x.verify.score for x in out]


def _hostile(task: Task) -> list[str]:
    """Answers a reward hacker would try, from what the prompt shows (never the ground truth)."""
    tools = [json.loads(line)["function"] for line in
             task.prompt[0].content.split("<tools>\n")[1].split("\n</tools>")[0].splitlines() if line]
    out = [call("no_such_function", x=1)]
    junk = {"string": "zzq", "integer": -987654, "number": -987654.5, "boolean": True, "array": ["zzq"], "object": {}}
    for f in tools:
        props = f["parameters"].get("properties", {})
        args = {k: junk.get(v.get("type"), "zzq") for k, v in props.items()}
        out += [call(f["name"], args), call(f["name"], {**args, "answer": 1, "expected": 1}),
                call(f["name"], {k: ("9" * 300 if isinstance(v, str) else 1e308) for k, v in args.items()})]
    every = "\n".join(call(f["name"], {k: junk.get(v.get("type"), "zzq") for k, v in
                                        f["parameters"].get("properties", {}).items()}) for f in tools)
    out += [every, every + "\n" + every]
    if task.oracle and "<tool_call>" in task.oracle:
        out += [task.oracle + "\n" + task.oracle, task.oracle + "\n" + call("no_such_function"),
                task.oracle + "\nDone.", "```json\n" + task.oracle + "\n```"]
    return [x for x in out if x != task.oracle]


@needs_bfcl
def test_hostile_answers_and_every_hack_probe_score_0_on_the_rl_path(dom):
    from posttrain.verifiers.soundness.probe_check import probe_texts

    tasks = dom.generate(10**6, 0)
    picked = {}
    for t in tasks:  # three tasks of every category
        picked.setdefault(t.metadata["category"], []).append(t)
    sample = [t for ts in picked.values() for t in ts[:3]]
    assert len(picked) == 10
    for t in sample:
        texts = _hostile(t) + list(probe_texts(t).values())
        scores = _score(t, [t.oracle] + texts)
        assert scores[0] == 1.0, t.id
        assert scores[1:] == [0.0] * len(texts), (t.id, [x for x, s in zip(texts, scores[1:]) if s])


def test_the_frozen_suite_holds_bfcl_tasks_whose_oracles_pass():
    from posttrain.eval.suite import load_suite

    suite = load_suite("bfcl")
    assert suite.domains == ["bfcl"] and len(suite.tasks) >= 50
    assert {t.metadata["split"] for t in suite.tasks} == {"heldout"}
    for t in suite.tasks:
        assert _score(t, [t.oracle]) == [1.0], t.id


# ---- agreement with the package's own AST checker --------------------------------------


def reference_checker():
    """bfcl-eval's `ast_checker`, imported from its file. Its module imports the model table
    (every provider SDK) only to map dotted names for some APIs: a stub stands in, mapping none."""
    import importlib

    class NoRename:
        underscore_to_dot = False

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = type("AnyModel", (dict,), {"__missing__": lambda self, k: NoRename()})()
    saved = sys.modules.get(stub.__name__)
    sys.modules[stub.__name__] = stub
    try:
        mod = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    finally:
        if saved is None:
            sys.modules.pop(stub.__name__, None)
        else:
            sys.modules[stub.__name__] = saved
    from bfcl_eval.constants.enums import Language

    return lambda item, calls: mod.ast_checker(copy.deepcopy(item["function"]), copy.deepcopy(calls),
                                               copy.deepcopy(item["ground_truth"]), Language.PYTHON,
                                               {"simple": "simple_python"}.get(item["category"], item["category"]),
                                               "any_model")["valid"]


def _bump(v, rng):
    """A value near `v` of the same type (usually outside the allowed list)."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + rng.choice([1, -1, 100])
    if isinstance(v, float):
        return v + rng.choice([0.5, -1.0, 1e6])
    if isinstance(v, str):
        return rng.choice([v + "x", v.upper(), v.replace(" ", "-") + ".", "", v[:-1]])
    if isinstance(v, list):
        return rng.choice([v[:-1], v + v[:1], list(reversed(v)), [_bump(x, rng) for x in v]])
    if isinstance(v, dict):
        if not v:
            return {"k": 1}
        k = rng.choice(sorted(v))
        return rng.choice([{**v, k: _bump(v[k], rng)}, {x: y for x, y in v.items() if x != k}, {**v, "zz": 1}])
    return "zzq"


def _retype(v, rng):
    """`v` in another JSON type (int <-> float <-> str, bool -> int, list -> str, ...)."""
    if isinstance(v, bool):
        return rng.choice([int(v), str(v).lower()])
    if isinstance(v, int):
        return rng.choice([float(v), str(v), [v]])
    if isinstance(v, float):
        return rng.choice([int(v), str(v)])
    if isinstance(v, str):
        return rng.choice([[v], 0, None])
    if isinstance(v, list):
        return rng.choice([json.dumps(v), [float(x) if type(x) is int else x for x in v],
                           [int(x) if type(x) is float else x for x in v], {}])
    if isinstance(v, dict):
        return rng.choice([[v], json.dumps(v)])
    return 1


def candidates(item, rng):
    """Calls to judge for one item: the oracle, other allowed values, mutated, retyped and
    dropped values, extra args, extra / missing / duplicated / renamed calls, swapped order."""
    from posttrain.tasks.bfcl import _concrete, oracle_calls

    docs = {f["name"]: f for f in item["function"]}
    base = [{n: a} for n, a in oracle_calls(item["ground_truth"], item["function"])]
    out = [base]
    if len(base) > 1:
        out += [base[::-1], rng.sample(base, len(base)), base[:-1], base + base[:1]]
    else:
        out += [base + base]
    for i, c in enumerate(base):
        (name, args), = c.items()
        gt = item["ground_truth"][i][name]

        def with_args(new, name=name, i=i):
            return base[:i] + [{name: new}] + base[i + 1:]

        for p in list(args)[:4]:
            out += [with_args({**args, p: _bump(args[p], rng)}), with_args({**args, p: _retype(args[p], rng)}),
                    with_args({k: v for k, v in args.items() if k != p})]
            alts = [a for a in gt.get(p, []) if not (type(a) is str and a == "")]
            if len(alts) > 1:
                out.append(with_args({**args, p: _concrete(rng.choice(alts[1:]))}))
        declared = [k for k in docs.get(name, {}).get("parameters", {}).get("properties", {}) if k not in args]
        if declared:
            out.append(with_args({**args, declared[0]: "zzq"}))
        out.append(with_args({**args, "zzq_extra": 1}))
        others = [n for n in docs if n != name]
        out.append(base[:i] + [{(others[0] if others else name + "_x"): args}] + base[i + 1:])
    return out


@needs_bfcl
def test_our_checker_agrees_with_bfcls_ast_checker_on_thousands_of_calls():
    from posttrain.tasks.bfcl import CALLS, load_category
    from posttrain.tasks.bfcl_ast import check

    ref = reference_checker()
    rng = random.Random(22)
    agree = total = passed = 0
    misses = []
    for cat in CALLS:
        items = list(load_category(cat))
        for item in rng.sample(items, min(40, len(items))):
            for calls in candidates(item, rng):
                ours = check(item["function"], calls, item["ground_truth"], cat)[0]
                theirs = ref(item, calls)
                total += 1
                passed += ours
                agree += ours == theirs
                if ours != theirs:
                    misses.append((item["id"], calls, ours, theirs))
    print(f"\nbfcl agreement: {agree}/{total} candidate calls ({100.0 * agree / total:.2f}%), {passed} pass")
    assert total >= 2000 and 0 < passed < total
    assert not misses, misses[:5]
