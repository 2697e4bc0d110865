"""A strict, tagged encoding of plain data, for values that cross from untrusted code.

    blob = dumps(value)            # bytes; TypeError for anything that is not plain data
    value = loads(blob)            # ValueError for anything malformed, too big or too deep

Plain data is exactly: None, bool, int, float (inf and nan included), str, bytes, and
list / tuple / dict / set / frozenset of plain data. Types are checked with `type(v) is
T`, so a subclass of int or str (with its own `__eq__`, `__hash__`, `__repr__`) is not
plain data. Each value is a JSON array `[tag, payload]`; `loads` rebuilds it from
builtins only, so whoever compares the result calls only the builtins' `__eq__`, never
one the sender defined. A sender that controls its own encoder (candidate code can
monkeypatch anything in its process) can at most send some other plain value: the
receiver gets data, never behaviour.

Limits: `dumps` refuses more than `MAX_ITEMS` container items in all; `loads` takes at
most `max_bytes` of input; both refuse more than `MAX_DEPTH` levels of nesting and ints
of more than `MAX_INT_DIGITS` digits. Keys of a dict and items of a set must be
hashable once decoded (a list key is a ValueError).

The sandbox cannot import posttrain, so the codec is one source string, `SOURCE`, that
the in-sandbox runners embed and this module executes: both sides run the same code.
"""

from __future__ import annotations

SOURCE = r'''
import json as _json

MAX_DEPTH = 64
MAX_BYTES = 8 << 20
MAX_INT_DIGITS = 4000
MAX_ITEMS = 1 << 20
_SCALARS = {type(None): "N", bool: "B", int: "I", float: "F", str: "S", bytes: "Y"}
_CONTAINERS = {list: "L", tuple: "T", set: "E", frozenset: "Z", dict: "D"}


def to_tree(v, depth=0, budget=None):
    """`v` as nested JSON-able lists; TypeError unless `v` is plain data (exact types) of
    at most MAX_ITEMS container items in all (checked before walking a container)."""
    if depth > MAX_DEPTH:
        raise TypeError("nested deeper than %d" % MAX_DEPTH)
    if budget is None:
        budget = [MAX_ITEMS]
    t = type(v)
    tag = _SCALARS.get(t)
    if tag is not None:
        if t is int:
            try:
                digits = str(v)
            except ValueError:  # past Python's own int-to-str limit
                raise TypeError("int with too many digits") from None
            if len(digits) > MAX_INT_DIGITS + 1:
                raise TypeError("int with more than %d digits" % MAX_INT_DIGITS)
            return [tag, digits]
        if t is float:
            return [tag, repr(v)]
        if (t is str or t is bytes) and len(v) > MAX_BYTES:  # refused before encoding it
            raise TypeError("longer than %d" % MAX_BYTES)
        if t is bytes:
            return [tag, v.hex()]
        return [tag, v]
    tag = _CONTAINERS.get(t)
    if tag is None:
        raise TypeError("not plain data: %s" % t.__name__)
    budget[0] -= len(v)
    if budget[0] < 0:
        raise TypeError("more than %d items" % MAX_ITEMS)
    if t is dict:
        return [tag, [[to_tree(k, depth + 1, budget), to_tree(x, depth + 1, budget)] for k, x in v.items()]]
    return [tag, [to_tree(x, depth + 1, budget) for x in v]]


def dumps(v):
    return _json.dumps(to_tree(v), separators=(",", ":")).encode()


def from_tree(node, depth=0):
    """Rebuild a value from `to_tree`'s form, with builtins only; ValueError if malformed."""
    if depth > MAX_DEPTH:
        raise ValueError("nested deeper than %d" % MAX_DEPTH)
    if type(node) is not list or len(node) != 2 or type(node[0]) is not str:
        raise ValueError("malformed node")
    tag, p = node
    if tag == "N" and p is None:
        return None
    if tag == "B" and type(p) is bool:
        return p
    if tag == "I" and type(p) is str and 0 < len(p) <= MAX_INT_DIGITS and p.lstrip("-").isdigit() and p.isascii():
        return int(p)
    if tag == "F" and type(p) is str and len(p) <= 40:
        return float(p)
    if tag == "S" and type(p) is str:
        return p
    if tag == "Y" and type(p) is str:
        return bytes.fromhex(p)
    if type(p) is not list:
        raise ValueError("malformed node with tag %r" % tag[:8])
    if tag == "L":
        return [from_tree(x, depth + 1) for x in p]
    if tag == "T":
        return tuple(from_tree(x, depth + 1) for x in p)
    if tag in ("E", "Z"):
        items = [from_tree(x, depth + 1) for x in p]
        try:
            return set(items) if tag == "E" else frozenset(items)
        except TypeError:
            raise ValueError("unhashable set item") from None
    if tag == "D":
        out = {}
        for kv in p:
            if type(kv) is not list or len(kv) != 2:
                raise ValueError("malformed dict item")
            try:
                out[from_tree(kv[0], depth + 1)] = from_tree(kv[1], depth + 1)
            except TypeError:
                raise ValueError("unhashable dict key") from None
        return out
    raise ValueError("unknown tag %r" % tag[:8])


def loads(blob, max_bytes=MAX_BYTES):
    if len(blob) > max_bytes:
        raise ValueError("value larger than %d bytes" % max_bytes)
    try:
        return from_tree(_json.loads(blob))
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except (TypeError, UnicodeDecodeError, OverflowError) as e:
        raise ValueError("malformed value: %s" % type(e).__name__) from None
'''

exec(compile(SOURCE, "plain_data.SOURCE", "exec"), globals())  # defines to_tree/dumps/from_tree/loads here
