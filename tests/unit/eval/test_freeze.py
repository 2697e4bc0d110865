"""`python -m posttrain.eval.freeze` rebuilds the built-in suites: what it writes today is, byte for
byte, what is committed under posttrain/eval/suites/, so a generator change that would silently
move a pinned suite shows up here (and the maintainer re-pins it deliberately, docs/eval.md)."""

from __future__ import annotations

import pytest

from posttrain.eval.freeze import BUILTINS, freeze_suite, main
from posttrain.eval.suite import BUILTIN_DIR

# Frozen before their generators' draws changed; rebuilding them re-pins them and makes older runs
# incomparable, so they are left as frozen (docs/eval.md, "Regression suite").
LEFT_AS_FROZEN = {"code", "regression", "terminal"}
# Their generators need optional packages (the `benchmarks` and `reasoning_gym` extras).
OPTIONAL = {"math500", "aime", "ifbench", "reasoning_gym"}


@pytest.mark.parametrize("name", sorted(set(BUILTINS) - LEFT_AS_FROZEN - OPTIONAL))
def test_rebuilding_a_builtin_suite_reproduces_the_committed_one(name, tmp_path):
    counts, epochs, description, max_new = BUILTINS[name]
    suite = freeze_suite(name, counts, tmp_path, epochs, description, max_new_tokens=max_new)
    assert suite.read_text() == (BUILTIN_DIR / f"{name}.yaml").read_text()
    assert (tmp_path / "tasks" / f"{name}.jsonl").read_text() == (BUILTIN_DIR / "tasks" / f"{name}.jsonl").read_text()


def test_an_unknown_suite_name_is_refused_before_anything_is_written():
    with pytest.raises(SystemExit, match="unknown built-in suite.*nope"):
        main(["nope"])
