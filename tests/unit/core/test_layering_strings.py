"""The layering holds for module names held in strings too: a lower layer that names an upper
module in a string (for importlib, or a registry's table of modules to load) reaches it as
surely as an import does, and hides the edge from test_layering.py's import reading. A string
counts when it is a whole dotted posttrain module name ("posttrain.serve.proxy_host"), or an
f-string that starts with one ("posttrain.recipes.{m}")."""

from __future__ import annotations

import ast
import re

from tests.unit.core.test_layering import PKG, RANK, _module_name, _part

MODULE = re.compile(r"posttrain(\.[A-Za-z_][A-Za-z0-9_]*)+")
PREFIX = re.compile(r"posttrain\.[A-Za-z_][A-Za-z0-9_]*\.")


def module_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module name) of every string in `tree` that names a posttrain module."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and MODULE.fullmatch(n.value):
            out.append((n.lineno, n.value))
        elif isinstance(n, ast.JoinedStr) and n.values and isinstance(n.values[0], ast.Constant) \
                and isinstance(n.values[0].value, str) and PREFIX.match(n.values[0].value):
            out.append((n.lineno, n.values[0].value.rstrip(".")))
    return sorted(out)


def upward_strings(mod: str, source: str) -> list[str]:
    """The strings of module `mod` that name a module of a higher layer."""
    here = RANK.get(_part(mod))
    bad = []
    for line, name in module_strings(ast.parse(source)):
        there = RANK.get(_part(name))
        if here is not None and there is not None and there > here:
            bad.append(f"{mod}:{line} names {name!r} in a string")
    return bad


def test_the_check_catches_a_string_reference_up_the_layers():
    src = ('import importlib\n_TABLE = {"x": ("posttrain.serve.proxy_host",)}\n'
           'mods = [f"posttrain.recipes.{m}" for m in ("sft",)]\nimportlib.import_module("posttrain.types")\n'
           'doc = "see posttrain.serve for the server"\n')
    assert upward_strings("posttrain.registry", src) == [
        "posttrain.registry:2 names 'posttrain.serve.proxy_host' in a string",
        "posttrain.registry:3 names 'posttrain.recipes' in a string",
    ]  # the import of a lower module and the prose are fine


def test_no_module_names_an_upper_layer_in_a_string():
    bad = []
    for p in sorted(PKG.rglob("*.py")):
        bad += upward_strings(_module_name(p), p.read_text())
    assert not bad, "a lower layer names an upper module by string (wire it at the composition root):\n" + \
        "\n".join(bad)
