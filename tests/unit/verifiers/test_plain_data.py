"""The plain-data codec: exact types round-trip; anything else is refused on both ends."""

import math

import pytest

from posttrain.verifiers import plain_data


def test_plain_values_round_trip_with_their_exact_types():
    v = [None, True, 0, -12**40, 1.5, float("inf"), "é\ud800", b"\x00\xff", (1, [2]), {"a": {1: (3,)}},
         {1, "x"}, frozenset({(1, 2)})]
    out = plain_data.loads(plain_data.dumps(v))
    assert out == v and [type(x) for x in out] == [type(x) for x in v]
    assert type(out[8]) is tuple and type(out[11]) is frozenset


def test_nan_round_trips():
    assert math.isnan(plain_data.loads(plain_data.dumps(float("nan"))))


@pytest.mark.parametrize("value", [
    type("I", (int,), {"__eq__": lambda s, o: True, "__hash__": int.__hash__})(1),
    type("S", (str,), {})("x"), object(), len, iter([]), 1j,
])
def test_non_plain_values_are_refused(value):
    with pytest.raises(TypeError):
        plain_data.dumps(value)


def test_too_many_items_are_refused_before_walking_them():
    with pytest.raises(TypeError):
        plain_data.dumps([[0] * (plain_data.MAX_ITEMS // 2), [0] * (plain_data.MAX_ITEMS // 2 + 1)])


def test_self_reference_and_depth_are_refused():
    v: list = []
    v.append(v)
    with pytest.raises(TypeError):
        plain_data.dumps(v)


@pytest.mark.parametrize("blob", [
    b"[" * 100000, b'["I","1e5"]', b'["I","\xd9\xa1"]', b'["X",1]', b'["L",[["I","1"],1]]', b'["D",[[["L",[]],["N",null]]]]',
    b'["E",[["L",[]]]]', b"not json", b'["B",1]', b'["F","%s"]' % (b"1" * 50),
])
def test_malformed_input_is_a_value_error(blob):
    with pytest.raises(ValueError):
        plain_data.loads(blob)


def test_input_over_the_size_cap_is_refused():
    with pytest.raises(ValueError):
        plain_data.loads(plain_data.dumps("x" * 100), max_bytes=50)
