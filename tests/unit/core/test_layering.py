"""DESIGN.md's layering, enforced: lower layers never import upper ones, and no import cycles.

Layers, lowest first (DESIGN.md, "Modules: who owns what"):
    types/errors <- registry/config <- sandbox, schedule, models, store, parallel <- tasks
    <- verifiers <- rollout, serve <- eval, longctx <- train <- recipes, view <- cli
(`serve` sits with `rollout`: RL on external agents runs episodes through its proxy.)
`config_check` (the checks of a config that read task files) sits with `tasks`.
`distributed` (the only Ray user) is wired in from outside `train`: train imports it
nowhere, and it may import anything below `cli`. Every import counts, lazy ones inside
functions included: a lazy import still couples the modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "posttrain"

LAYERS = [
    {"types", "errors"},
    {"registry", "config"},
    {"sandbox", "schedule", "models", "store", "parallel"},
    {"tasks", "config_check"},  # config_check reads task files and plugins, so it sits with tasks
    {"verifiers"},
    {"rollout", "serve"},  # serve drives the fast engine; rollout/agent/external.py runs its proxy
    {"eval", "longctx"},
    {"train"},
    {"recipes", "view", "distributed"},
    {"cli"},
]
RANK = {part: i for i, layer in enumerate(LAYERS) for part in layer}


def _module_name(p: Path) -> str:
    parts = p.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in PKG.rglob("*.py"):
        tree = ast.parse(p.read_text())
        mods = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0 and n.module.startswith("posttrain"):
                mods.add(n.module)
                mods.update(f"{n.module}.{a.name}" for a in n.names)
            elif isinstance(n, ast.Import):
                mods.update(a.name for a in n.names if a.name.startswith("posttrain"))
        out[_module_name(p)] = mods
    known = set(out)
    return {m: {d for d in ds if d in known and d != m} for m, ds in out.items()}


def _part(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_module_imports_an_upper_layer():
    bad = []
    for mod, deps in _imports().items():
        here = RANK.get(_part(mod))
        for d in deps:
            there = RANK.get(_part(d))
            if here is not None and there is not None and there > here:
                bad.append(f"{mod} imports {d}")
    assert not bad, "\n".join(sorted(bad))


def test_train_never_imports_distributed():
    bad = [f"{m} imports {d}" for m, ds in _imports().items() if _part(m) == "train" for d in ds
           if _part(d) == "distributed"]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph = _imports()  # a submodule importing its own package (its __init__) is an edge too
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                cycles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(cycles[:20])
