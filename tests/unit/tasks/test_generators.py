import random

import pytest

from posttrain.registry import build, registry
from posttrain.tasks import generate_domain

DOMAINS = ["math", "extraction", "needle", "conflict", "tools", "scene", "terminal", "humaneval"]


@pytest.mark.parametrize("name", DOMAINS)
def test_seeded_generation_is_deterministic_and_seed_dependent(name):
    a, b, c = (generate_domain(name, 6, s, 1.0) for s in (3, 3, 4))
    assert [t.version for t in a] == [t.version for t in b]
    assert [t.version for t in a] != [t.version for t in c]


@pytest.mark.parametrize("name", DOMAINS)
def test_every_task_has_an_oracle_and_a_buildable_verifier(name):
    from posttrain.verifiers.compose import build_verifier

    for t in generate_domain(name, 5, 0, 1.0):
        assert t.oracle and t.domain == name
        assert callable(build_verifier(t.verifier))


def test_all_issue_domains_are_registered():
    assert set(DOMAINS) | {"arithmetic", "code"} <= set(registry("domain").names())


def test_humaneval_ships_all_164_problems():
    assert len({t.id for t in generate_domain("humaneval", 500, 0)}) == 164


def test_needle_length_and_depth_knobs():
    short = build("needle", kind="domain", length=200, depth=0.0).generate(1, 0)[0]
    long = build("needle", kind="domain", length=2000, depth=1.0).generate(1, 0)[0]
    assert len(long.prompt[0].content) > 5 * len(short.prompt[0].content)
    text = long.prompt[0].content
    needle = f"for {long.metadata['key']} is {long.oracle}"
    assert text.index(needle) > 0.9 * text.index("What is")  # depth 1.0: at the end of the haystack
    assert short.prompt[0].content.index(f"for {short.metadata['key']} is {short.oracle}") < 200


def test_needle_variants_cover_ruler_kinds():
    kinds = {t.metadata["variant"] for t in generate_domain("needle", 8, 0, 0.0)}
    assert kinds == {"single", "multikey", "multivalue", "distractor"}


@pytest.mark.parametrize("name,measure", [
    ("scene", lambda t: len(t.metadata["target_scene"])),
    ("conflict", lambda t: len(t.metadata["values"])),
    ("tools", lambda t: t.metadata["reference_steps"]),
])
def test_difficulty_knob_grows_the_task(name, measure):
    easy = sum(measure(t) for t in generate_domain(name, 10, 0, 0.0))
    hard = sum(measure(t) for t in generate_domain(name, 10, 0, 3.0))
    assert hard > easy


def test_wrong_answers_differ_from_oracles():
    for name in ["math", "extraction", "needle", "conflict", "tools", "scene", "terminal"]:
        dom = build(name, kind="domain")
        for t in dom.generate(5, 1, 1.0):
            assert dom.wrong_answer(t, random.Random(0)) != t.oracle


def test_code_shift_form_oracle_is_g_of_x_equals_f_of_x_plus_1():
    for t in build("code", kind="domain", form="shift").generate(20, seed=3, difficulty=0.6):
        m, c = (int(v) for v in t.prompt[-1].content.split()[0].removeprefix("f(x)=x*").split("+"))
        assert all(eval(t.oracle, {"x": x}) == m * (x + 1) + c == y for x, y in t.verifier.args["tests"])


def test_code_domain_names_an_unknown_form():
    with pytest.raises(ValueError, match="unknown form 'quadratic'"):
        build("code", kind="domain", form="quadratic")
