import asyncio
import json

import pytest

from posttrain.types import Spec
from posttrain.verifiers.compose import verify

from .helpers import answer, task


def s(spec, text):
    t = task(spec)
    return asyncio.run(verify(t, answer(t, text)))


@pytest.mark.parametrize("text", ["\\boxed{\\frac{7}{12}}", "so #### 7/12", "The answer is 0.583333", "x = 1, hence 7/12"])
def test_math_answer_normalises_forms(text):
    assert s(Spec("math_answer", {"answer": "7/12"}), text).score == 1.0


def test_math_answer_handles_separators_percent_and_wrong_values():
    assert s(Spec("math_answer", {"answer": "1234.5"}), "\\boxed{$1,234.50}").score == 1.0
    assert s(Spec("math_answer", {"answer": "0.25"}), "answer: 25%").score == 1.0
    assert s(Spec("math_answer", {"answer": "7/12"}), "\\boxed{7/13}").score == 0.0
    assert s(Spec("math_answer", {"answer": "3"}), "").reason == "no number in the answer"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", ["The answer is 7e9999999999.", "The 37e99999 is", "1" * 5000, "\\boxed{1e400}"])
def test_math_answer_fails_fast_on_numbers_too_large_to_build(text):
    # Fraction("7e9999999999") would compute 10**9999999999 and hang the verifier
    assert s(Spec("math_answer", {"answer": "3"}), text).score == 0.0


def test_field_match_gives_per_field_partial_credit():
    spec = Spec("field_match", {"expected": {"a": 1, "b": "x", "c": [1.0, 2.0], "d": True}})
    assert s(spec, json.dumps({"a": 1, "b": " X ", "c": [1.0, 2.5], "d": 1})).score == pytest.approx(3 / 5)


def test_schema_gate_zeroes_invalid_output():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    spec = Spec("gate", {"gate": {"name": "json_schema", "args": {"schema": schema}}, "then": {"name": "field_match", "args": {"expected": {"a": 1}}}})
    assert s(spec, '```json\n{"a": 1}\n```').score == 1.0
    r = s(spec, '{"a": "1"}')
    assert r.score == 0.0 and "schema" in r.reason


def test_citations_precision_and_recall():
    r = s(Spec("citations", {"supporting": ["d1", "d4"]}), "ANSWER: x\nCITATIONS: [d1], [d2], [d3]")
    assert (r.details["precision"], r.details["recall"]) == (pytest.approx(1 / 3), 0.5)
    assert r.score == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))


def test_needle_padding_with_distractors_costs_precision():
    spec = Spec("needle", {"values": [1234567]})
    assert s(spec, "1,234,567").score == 1.0
    assert s(spec, "1234567 or 7654321").score == pytest.approx(0.5)


def test_text_match_normalises():
    assert s(Spec("text_match", {"expected": "Paris"}), "The answer is: **paris**.".replace("**", "")).score == 1.0
