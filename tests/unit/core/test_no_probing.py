"""Capabilities are Protocols and declared properties: nothing in the package probes an engine,
a verifier or a tool with getattr/hasattr (README "no getattr/hasattr probing of components").

An engine's extra abilities are Protocols in rollout/engine.py (EngineInfo, WeightReceiver,
InflightWeights, ClusterMetrics, StreamingEngine) checked with isinstance, or properties it
declares where it registers (@engine(..., inflight_weights=...)); a verifier that batches is
a BatchVerifier; a tool is a declared Tool. This test reads every module's AST and fails on a
getattr/hasattr whose object is one of those components.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "posttrain"

# the object of the probe, as source text: an engine, a verifier, a tool, or a registry lookup of one
COMPONENT = re.compile(r"(^|\.)(engine|eng|verifier|verifiers|tool|tools|runner)$|verifier_for\(|"
                       r"registry\(['\"](engine|verifier|tool)['\"]\)")

# (module path, source of the probe's object): why it stays
ALLOWED: dict[tuple[str, str], str] = {}  # (file, object) -> why; empty: every capability is declared


def probes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, object source) of every getattr/hasattr call on a component."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr") and n.args:
            obj = ast.unparse(n.args[0])
            if COMPONENT.search(obj):
                out.append((n.lineno, obj))
    return out


def test_the_probe_finder_catches_each_kind_of_component():
    src = ("getattr(self.engine, 'max_len', 0)\nhasattr(v.verifier_for(t), 'verify_batch')\n"
           "getattr(registry('tool').get(n), 'needs_session', False)\ngetattr(model.config, 'x', None)\n")
    assert [o for _, o in probes(ast.parse(src))] == ["self.engine", "v.verifier_for(t)", "registry('tool').get(n)"]


def test_no_getattr_or_hasattr_on_engines_verifiers_or_tools():
    bad = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        for line, obj in probes(ast.parse(p.read_text())):
            if (rel, obj) not in ALLOWED:
                bad.append(f"posttrain/{rel}:{line}: getattr/hasattr on {obj}")
    assert not bad, "declare the capability (a Protocol or a registered property) instead:\n" + "\n".join(bad)
