"""docs/extending.md is what `python -m posttrain.cli.registry_doc` generates from the registries:
a new kind, entry, property or contract member cannot leave the committed page stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from posttrain.builtins import BUILTIN_MODULES
from posttrain.cli.registry_doc import CONTRACTS, PAGE

ROOT = Path(__file__).resolve().parents[3]


def test_committed_page_equals_the_generated_one():
    # a fresh interpreter: this process's registries may hold entries other tests registered
    out = subprocess.run([sys.executable, "-m", "posttrain.cli.registry_doc"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == PAGE.read_text(), (
        "docs/extending.md is stale: run `python -m posttrain.cli.registry_doc --write` and commit it")


def test_every_builtin_kind_names_its_contract_and_no_other():
    assert set(CONTRACTS) == set(BUILTIN_MODULES) and all(CONTRACTS.values())
