"""Every repository path the docs name exists: docs/*.md, README.md, posttrain's docstrings and
comments, the benchmark scripts and the examples.

What counts as a repository path (`REPO_PATH`): a token that starts with one of the repository's
top-level folders (posttrain/, docs/, examples/, tests/, benchmarks/) and is not the tail of a
longer path, so `/root/.cache/posttrain/x.pdf`, `runs/q/docs/a.md` and `~/tests/x.py` are not
repository paths. Globs and placeholders (`hack_probes*.py`, `examples/<name>.yaml`,
`tests/{a,b}.py`) are skipped as a whole. The few tokens that look like repository paths but name
a place elsewhere are listed in `ELSEWHERE`, each with where it lives.

Paths written inside the package's own terms (`train/rl.py`, `fast/engine.py`, `presets/agent.yaml`:
the first folder is one of posttrain's folders, `PACKAGE_RELATIVE`) must name a file somewhere under
posttrain/. history.md is left out of that check: it names files that have since been removed.
Placeholders in capitals (`presets/NAME.yaml`) are not paths.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Not preceded by a path character (then it is the tail of a longer path: a run directory, a
# cache, a user's home), not followed by one (then it is cut short, or a glob or placeholder).
REPO_PATH = re.compile(r"(?<![\w/.~$<{-])((?:posttrain|docs|examples|tests|benchmarks)/[\w./-]*[\w/])(?![\w*{</-]|\.\w)")

ELSEWHERE = {
    "tests/test.sh": "a Harbor/Terminal-Bench task folder's test script (docs/tasks.md)",
}
ELSEWHERE_PREFIXES = {
    "benchmarks/results/": "where benchmark scripts write their outputs, not committed",
}


PACKAGE_RELATIVE = re.compile(r"(?<![\w/.~$<{-])((?:[a-z_][\w-]*/)+[a-z_][\w-]*\.(?:py|md|yaml|json|c))(?![\w*{</-]|\.\w)")


def _sources() -> list[Path]:
    package = [p for p in ROOT.glob("posttrain/**/*.py") if "terminal_set" not in p.parts]  # task payloads
    examples = [p for p in ROOT.glob("examples/**/*") if p.is_file()]
    return sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *package, *ROOT.glob("benchmarks/**/*.py"),
                   *examples])


def _named_paths(text: str) -> list[tuple[int, str]]:
    return [(i, m.group(1)) for i, line in enumerate(text.splitlines(), 1) for m in REPO_PATH.finditer(line)]


def test_the_pattern_takes_repo_paths_and_leaves_other_paths():
    text = ("see docs/rl.md, posttrain/train/rl.py and examples/tiny_rl.yaml.\n"
            "/root/.cache/posttrain/r.pdf runs/q/docs/a.md ~/tests/x.py examples/<name>.yaml\n"
            "posttrain/verifiers/soundness/hack_probes*.py tests/{a,b}.py")
    assert [p for _, p in _named_paths(text)] == ["docs/rl.md", "posttrain/train/rl.py", "examples/tiny_rl.yaml"]


def test_the_package_pattern_leaves_absolute_paths_and_placeholders():
    text = "see train/async_rl/loop.py, /tmp/q/train/z.py, ~/train/y.py and presets/NAME.yaml"
    assert [m.group(1) for m in PACKAGE_RELATIVE.finditer(text)] == ["train/async_rl/loop.py"]


def test_every_repo_path_named_in_docs_and_docstrings_exists():
    missing = []
    for src in _sources():
        for line, path in _named_paths(src.read_text(errors="replace")):
            if path in ELSEWHERE or any(path.startswith(p) for p in ELSEWHERE_PREFIXES):
                continue
            if not (ROOT / path).exists():
                missing.append(f"{src.relative_to(ROOT)}:{line}: {path}")
    assert not missing, "paths named that do not exist:\n" + "\n".join(missing)


def test_every_package_relative_path_names_a_file_under_posttrain():
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "posttrain").rglob("*") if p.is_file()]
    folders = {p.name for p in (ROOT / "posttrain").rglob("*") if p.is_dir()}
    missing = []
    for src in _sources():
        if src.name == "history.md":
            continue
        for i, line in enumerate(src.read_text(errors="replace").splitlines(), 1):
            for m in PACKAGE_RELATIVE.finditer(line):
                path = m.group(1)
                if path.split("/")[0] not in folders or REPO_PATH.fullmatch(path):
                    continue  # not in the package's terms (a run directory, a user's file), or checked above
                if not any(f.endswith("/" + path) for f in files):
                    missing.append(f"{src.relative_to(ROOT)}:{i}: {path}")
    assert not missing, "package paths named that match no file under posttrain/:\n" + "\n".join(missing)
