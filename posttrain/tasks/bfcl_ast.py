"""BFCL's AST checker, rule for rule, over plain data (no import of the bfcl-eval package).

    check(functions, calls, ground_truth, category)   # -> (ok, error_type, error)

`functions`: the item's function docs (BFCL format: parameters.type "dict", properties
with BFCL types). `calls`: the model's decoded calls, `[{name: {arg: value}}, ...]`.
`ground_truth`: BFCL's possible answers, `[{name: {arg: [allowed values]}}, ...]`, where
`""` among the allowed values means "may be omitted". Mirrors
`bfcl_eval/eval_checker/ast_eval/ast_checker.py` (bfcl-eval 2026.3.23) for Python:

- simple: exactly one call, to `functions[0]`; multiple: exactly one call, to the
  ground truth's function; parallel*: as many calls as the ground truth, matched in any
  order, greedily (each expected call, in order, takes the first unmatched call that
  passes it; BFCL does not search for a better assignment, nor does this);
- per call: the name exactly; every required arg present; no arg the doc or the ground
  truth lacks; each value of its declared type (exact types, so a bool is no int; an int
  is accepted for a top-level float; array items are type-checked one level deep, where
  an int is *not* accepted for a float item), then in its allowed list: strings after
  BFCL's normalisation (`standardize`: spaces and `,./-_*^` dropped, lower case, `'`
  read as `"`), lists with their string items normalised, dicts key by key, lists of
  dicts in order; every arg left out must allow `""`;
- a value of the ground truth's type when that differs from the declared type (BFCL's
  "variable": `"x"` for an integer) is compared exactly.

Values compare with Python's `==` on builtins only (the caller parses JSON, so no
object the model made has an `__eq__`). Where BFCL's checker would crash (a list of
dicts holding a non-dict, a dict answer that cannot be indexed), this one says no.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

PY_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                             "tuple": list, "dict": dict, "any": str}
NESTED = ("array", "tuple")  # declared types whose items are type-checked too
_STRIP = re.compile(r"[ \,\.\/\-\_\*\^]")

Result = tuple[bool, str, str]  # (ok, error_type, error)
OK: Result = (True, "", "")


def standardize(s: str) -> str:
    """BFCL's string normalisation: 'April 1, 2024' == 'april 1 2024'."""
    return _STRIP.sub("", s).lower().replace("'", '"')


def _std(v: Any) -> Any:
    return standardize(v) if type(v) is str else v


def _answer_type(allowed: Sequence[Any]) -> type | None:
    """The type of the first allowed value that is not the 'omitted' marker."""
    for a in allowed:
        if not (type(a) is str and a == ""):
            return type(a)
    return None


def _type_ok(value: Any, allowed: Sequence[Any], want: type, nested: type | None) -> tuple[bool, bool]:
    """(type ok, is_variable), as BFCL's type_checker."""
    pat = _answer_type(allowed)
    is_var = pat is not None and pat is not want
    if type(value) is want:
        if nested is None:
            return True, is_var
        for item in allowed:  # one allowed value whose items all type-check is enough
            if type(item) is list and not all(_type_ok(v, item, nested, None)[0] for v in value):
                continue
            return True, is_var
        return False, is_var
    if pat is not None and type(value) is pat:
        return True, True
    return False, is_var


def _in(value: Any, allowed: Sequence[Any]) -> bool:
    return any(value == a for a in allowed)


def _may_omit(allowed: Any) -> bool:
    """BFCL's `"" in allowed`: the arg may be left out (a string holds "" as a substring)."""
    if isinstance(allowed, str):
        return True
    return isinstance(allowed, (list, tuple)) and _in("", allowed)


def _iter_items(a: Any) -> list[Any] | None:
    """`a[0..len(a)]` as BFCL indexes it (a string gives its characters); None if not indexable."""
    if isinstance(a, (list, str)):
        return list(a)
    return None


def _list_ok(value: list, allowed: Sequence[Any]) -> bool:
    out = [_std(v) for v in value]
    for a in allowed:
        items = _iter_items(a)
        if items is not None and out == [_std(x) for x in items]:
            return True
    return False


def _dict_ok(value: Any, allowed: Sequence[Any]) -> bool:
    if type(value) is not dict:
        return False
    for a in allowed:
        if type(a) is str and a == "":
            continue
        if not isinstance(a, Mapping):
            return False  # BFCL would crash indexing it
        ok = True
        for k, v in value.items():
            opts = _iter_items(a[k]) if k in a else None
            if opts is None or not _in(_std(v), [_std(x) for x in opts]):
                ok = False
                break
        if ok and all(k in value or _may_omit(vals) for k, vals in a.items()):
            return True
    return False


def _list_dict_ok(value: list, allowed: Sequence[Any]) -> bool:
    for a in allowed:
        items = _iter_items(a)
        if items is None or len(items) != len(value):
            continue
        if all(_dict_ok(v, [d]) for v, d in zip(value, items)):
            return True
    return False


def check_call(doc: Mapping[str, Any], call: Mapping[str, Any], answer: Mapping[str, Any]) -> Result:
    """One decoded call `{name: args}` against one ground-truth call `{name: {arg: allowed}}`."""
    possible = next(iter(answer.values()))
    name = doc["name"]
    props = doc["parameters"]["properties"]
    if name not in call:
        return False, "wrong_func_name", f"function {name!r} not called"
    args = call[name]
    if not isinstance(args, Mapping):
        return False, "bad_arguments", "arguments are not an object"
    for r in doc["parameters"].get("required", []):
        if r not in args:
            return False, "missing_required", f"missing required argument {r!r}"
    for param, value in args.items():
        if param not in props or param not in possible:
            return False, "unexpected_param", f"unexpected argument {param!r}"
        declared = props[param].get("type")
        want = PY_TYPES.get(declared)
        if want is None:
            return False, "type_error", f"{param!r}: declared type {declared!r} is not a Python AST type"
        nested = None
        if declared in NESTED:
            nested = PY_TYPES.get(props[param].get("items", {}).get("type"))
            if nested is None:
                return False, "type_error", f"{param!r}: unknown item type"
        if declared == "float" and type(value) is int:
            value = float(value)
        allowed = possible[param]
        ok, is_var = _type_ok(value, allowed, want, nested)
        if not ok:
            return False, "type_error", f"{param!r}: wrong type {type(value).__name__} for {declared}"
        if not is_var:
            if want is dict:
                good = _dict_ok(value, allowed)
            elif want is list and nested is dict:
                good = _list_dict_ok(value, allowed)
            elif want is str:
                good = _std(value) in [standardize(a) for a in allowed if type(a) is str]
            elif want is list:
                good = _list_ok(value, allowed)
            else:
                good = _in(value, allowed)
        else:
            good = _in(value, allowed)
        if not good:
            return False, "value_error", f"{param!r}: value not among the allowed ones"
    for param, allowed in possible.items():
        if param not in args and not _may_omit(allowed):
            return False, "missing_optional", f"argument {param!r} left out but not optional"
    return OK


def _doc(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((f for f in functions if f["name"] == name), None)


def check(functions: Sequence[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]],
          ground_truth: Sequence[Mapping[str, Any]], category: str) -> Result:
    """BFCL's `ast_checker` for a Python category (see the module doc)."""
    if len(calls) != len(ground_truth):
        return False, "wrong_count", f"{len(calls)} calls, expected {len(ground_truth)}"
    if "parallel" in category:
        used: set[int] = set()
        for i, answer in enumerate(ground_truth):
            doc = _doc(functions, next(iter(answer)))
            if doc is None:
                return False, "no_doc", "ground truth names a function the item does not offer"
            hit = next((j for j, c in enumerate(calls) if j not in used and check_call(doc, c, answer)[0]), None)
            if hit is None:
                return False, "no_match", f"no call matches expected call {i}"
            used.add(hit)
        return OK
    doc = _doc(functions, next(iter(ground_truth[0]))) if "multiple" in category else functions[0]
    if doc is None:
        return False, "no_doc", "ground truth names a function the item does not offer"
    return check_call(doc, calls[0], ground_truth[0])
