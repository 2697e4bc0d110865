"""DESIGN.md's layering, enforced: lower layers never import upper ones, and no import cycles.

Layers, lowest first (DESIGN.md, "Modules: who owns what"):
    types/errors <- registry/config <- sandbox, schedule, models, store, parallel <- tasks
    <- verifiers <- rollout <- eval, longctx <- train <- recipes, serve, view <- cli
(RL on external agents runs episodes through serve's proxy: the recipe hands serve/proxy_host.py's
ServedProxy down to rollout/agent/external.py, which never imports serve.)
`config_check` (the checks of a config that read task files) sits with `tasks`.
`parallel` (FSDP2/DTensor meshes, DCP, the rank group and launcher) sits with the lowest
packages: it knows nothing of tasks, sandboxes, rollouts, training or Ray, so everything it
reaches is `types`, `errors`, `registry` or `config` (the training side is `train/sharded/`).
`distributed` (the only Ray user) is wired in from outside `train`: train imports it
nowhere, and it may import anything below `cli`. Every import counts, lazy ones inside
functions included: a lazy import still couples the modules.

README.md "## Layout", the third-party rules: `types.py` and `errors.py` import nothing
heavy (the standard library only), nor does anything of posttrain they import; `sandbox/`
never imports torch, directly or through a posttrain module it imports; and only
`distributed/` imports Ray (anywhere else, module-level or lazy, is a violation).
"""

from __future__ import annotations

import ast
import functools
import sys
from collections import deque
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "posttrain"

LAYERS = [
    {"types", "errors"},
    {"registry", "config", "config_components", "config_schema", "config_optim", "config_rl", "config_recipe"},  # config_*: the schema config.py loads
    {"sandbox", "schedule", "models", "store", "parallel"},
    {"tasks", "config_check"},  # config_check reads task files and plugins, so it sits with tasks
    {"verifiers"},
    {"rollout"},
    {"eval", "longctx"},
    {"train"},
    {"recipes", "serve", "view", "distributed"},
    {"cli", "builtins", "testing"},  # builtins.py names every layer's modules: load_builtins(), called by the CLI;
    # testing/: helpers of the tests and benchmarks, which nothing in the package may import
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


def test_parallel_reaches_only_the_layers_below_it():
    """Not even a package of its own layer (sandbox, schedule, models, store), lazy imports counted."""
    via = _reached(sorted(m for m in _files() if _part(m) == "parallel"))
    allowed = {"", "parallel", "config_schema", *LAYERS[0], *LAYERS[1]}  # "": the posttrain package
    bad = [f"{m} (reached: {' <- '.join(_chain(m, via))})" for m in sorted(via) if _part(m) not in allowed]
    assert via and not bad, "parallel/ may import only types, errors, registry and config:\n" + "\n".join(bad)


def _chain(mod: str, via: dict[str, str | None]) -> list[str]:
    chain = [mod]
    while via[chain[-1]] is not None:
        chain.append(via[chain[-1]])
    return chain


def test_train_never_imports_distributed():
    bad = [f"{m} imports {d}" for m, ds in _imports().items() if _part(m) == "train" for d in ds
           if _part(d) == "distributed"]
    assert not bad, "\n".join(bad)


def test_nothing_in_the_package_imports_the_test_helpers():
    """posttrain/testing/ serves tests/ and benchmarks/ only: no other module imports it."""
    bad = [f"{m} imports {d}" for m, ds in _imports().items() if _part(m) != "testing" for d in ds
           if _part(d) == "testing"]
    assert not bad, "\n".join(sorted(bad))


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


# ---- third-party imports (README.md "## Layout", "must not") ----------------------------------
@functools.lru_cache(maxsize=None)
def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


@functools.lru_cache(maxsize=None)
def _external(mod: str) -> tuple[tuple[int, str], ...]:
    """(line, module) of every import in `mod` from outside posttrain, lazy ones included; a
    string constant given to importlib.import_module or __import__ counts as an import too."""
    out = []
    for n in ast.walk(ast.parse(_files()[mod].read_text())):
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.append((n.lineno, n.module))
        elif (isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
              and isinstance(n.args[0].value, str)
              and (isinstance(n.func, ast.Name) and n.func.id == "__import__"
                   or isinstance(n.func, ast.Attribute) and n.func.attr == "import_module")):
            out.append((n.lineno, n.args[0].value))
    return tuple((line, m) for line, m in out if m.split(".")[0] != "posttrain")


def _reached(roots: list[str]) -> dict[str, str | None]:
    """Every posttrain module that importing `roots` loads (their packages' __init__ included,
    lazy imports counted), each mapped to the module that reached it (None for a root)."""
    graph, files = _imports(), _files()
    via: dict[str, str | None] = {}
    todo = deque((r, None) for r in roots)  # breadth first: the chain named is a shortest one
    while todo:
        m, parent = todo.popleft()
        if m in via:
            continue
        via[m] = parent
        parts = m.split(".")
        pkgs = [".".join(parts[:i]) for i in range(1, len(parts))]
        todo.extend((d, m) for d in sorted(graph.get(m, set()) | {p for p in pkgs if p in files}))
    return via


def _where(mod: str, via: dict[str, str | None], line: int, name: str) -> str:
    chain = [mod]
    while via[chain[-1]] is not None:
        chain.append(via[chain[-1]])
    path = _files()[mod].relative_to(PKG.parent)
    how = f" (reached: {' <- '.join(chain)})" if len(chain) > 1 else ""
    return f"{path}:{line} imports {name}{how}"


def test_types_and_errors_import_only_the_standard_library():
    via = _reached(["posttrain.types", "posttrain.errors"])
    bad = [_where(m, via, line, name) for m in sorted(via) for line, name in _external(m)
           if name.split(".")[0] not in sys.stdlib_module_names]
    assert not bad, "types.py and errors.py must not import torch or anything heavy:\n" + "\n".join(bad)


def test_sandbox_never_imports_torch():
    via = _reached(sorted(m for m in _files() if _part(m) == "sandbox"))
    bad = [_where(m, via, line, name) for m in sorted(via) for line, name in _external(m)
           if name.split(".")[0] == "torch"]
    assert not bad, "sandbox/ must not import torch:\n" + "\n".join(bad)


def test_only_distributed_imports_ray():
    mods = [m for m in sorted(_files()) if _part(m) != "distributed"]
    via = {m: None for m in mods}
    bad = [_where(m, via, line, name) for m in mods for line, name in _external(m) if name.split(".")[0] == "ray"]
    assert not bad, "only posttrain/distributed/ may import ray:\n" + "\n".join(bad)
