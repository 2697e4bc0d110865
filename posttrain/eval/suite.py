"""Evaluation suites: YAML files that pin exact task versions, sampling and epochs.

    suite = load_suite("regression")            # built-in, from posttrain/eval/suites/
    suite = load_suite("my_suite.yaml")         # or any path
    suite.tasks, suite.sampling, suite.epochs

A suite file:

    name: regression
    epochs: 5
    seed: 0
    sampling: {temperature: 0.7, top_p: 1.0, max_new_tokens: 24}   # token_budget: N bounds a whole episode
    concurrency: {generation: 256, sandboxes: 2}
    tasks:
      - file: tasks/regression.jsonl         # relative to the suite file, as every path a file names
        pins: {arith-0: 3fa1c2..., ...}      # task id -> content hash (task.version)
      - domain: arithmetic                   # or a seeded generator
        n: 10
        seed: 10000
        difficulty: 1.0
        pins: {...}

With `pins`, exactly the pinned tasks are used and each must have its pinned version:
a task that changed, or an id the source does not have, is an error listing them all.
Without pins every task of the source is used, unpinned (for ad-hoc suites). Tasks are
frozen into files for the built-in suites so that a tweak to a generator cannot change
a regression set silently; it shows up as a version mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from posttrain.config_schema import TOOLS_PROMPT_MODES
from posttrain.eval.records import EvalError
from posttrain.types import Task, content_hash

BUILTIN_DIR = Path(__file__).parent / "suites"
_SUITE_KEYS = {"name", "description", "epochs", "seed", "sampling", "concurrency", "tasks"}
# token_budget: a multi-step task's whole episode, prompt included (training's agent.token_budget); default
# the engine's context. max_new_tokens is one-step tasks' (an episode's turns keep their task's limit).
# tools_prompt: how an episode's tools reach the model (training's agent.tools_prompt; default auto).
_SAMPLING_KEYS = {"temperature", "top_p", "top_k", "max_new_tokens", "token_budget", "tools_prompt"}
_SOURCE_KEYS = {"file", "domain", "n", "seed", "difficulty", "args", "pins"}


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    tasks: tuple[Task, ...]
    epochs: int = 1
    seed: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    concurrency: dict[str, int] = field(default_factory=dict)
    description: str = ""

    @property
    def version(self) -> str:
        """Hash of what determines results: task versions, sampling, epochs, seed."""
        return content_hash({"tasks": sorted(t.version for t in self.tasks), "sampling": self.sampling,
                             "epochs": self.epochs, "seed": self.seed})

    @property
    def domains(self) -> list[str]:
        return sorted({t.domain for t in self.tasks})


def builtin_suites() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def resolve_suite_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    builtin = BUILTIN_DIR / f"{name_or_path}.yaml"
    if p.suffix not in (".yaml", ".yml") and not p.is_file() and builtin.is_file():
        return builtin  # a built-in name, even where the working directory holds a folder of that name
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise EvalError(f"suite file not found: {p.resolve()}")
        return p
    import difflib

    close = difflib.get_close_matches(str(name_or_path), builtin_suites(), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise EvalError(f"unknown suite {str(name_or_path)!r}{hint}; built-in suites: {', '.join(builtin_suites())} "
                    f"(a file? no {Path(name_or_path).resolve()})")


def _tasks_from_source(src: dict[str, Any], base: Path, where: str) -> list[Task]:
    extra = set(src) - _SOURCE_KEYS
    if extra:
        raise EvalError(f"{where}: unknown key(s) {', '.join(sorted(extra))} (allowed: {', '.join(sorted(_SOURCE_KEYS))})")
    if ("file" in src) == ("domain" in src):
        raise EvalError(f"{where}: give exactly one of 'file' or 'domain'")
    if "file" in src:
        from posttrain.tasks.io import load_tasks

        return load_tasks(base / src["file"])
    from posttrain.tasks import generate_domain

    try:
        return generate_domain(src["domain"], int(src.get("n", 10)), int(src.get("seed", 0)),
                               float(src.get("difficulty", 1.0)), **dict(src.get("args") or {}))
    except (TypeError, ValueError) as e:
        raise EvalError(f"{where}: cannot generate domain {src['domain']!r}: {e}") from None


def _apply_pins(tasks: list[Task], pins: dict[str, str] | None, where: str) -> list[Task]:
    if pins is None:
        return tasks
    if not isinstance(pins, dict):
        raise EvalError(f"{where}.pins: expected a mapping of task id -> version")
    by_id = {t.id: t for t in tasks}
    unknown = sorted(set(pins) - set(by_id))
    if unknown:
        raise EvalError(f"{where}: unknown task id(s) pinned: {', '.join(unknown[:10])}"
                        + (f" (and {len(unknown) - 10} more)" if len(unknown) > 10 else ""))
    changed = [f"{i} (pinned {v}, now {by_id[i].version})" for i, v in pins.items() if by_id[i].version != str(v)]
    if changed:
        raise EvalError(f"{where}: task version(s) changed since the suite was pinned: {'; '.join(changed[:10])}"
                        + (f" (and {len(changed) - 10} more)" if len(changed) > 10 else ""))
    return [by_id[i] for i in pins]


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise EvalError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise EvalError(f"{path}: a suite must be a mapping with a 'tasks' list")
    extra = set(data) - _SUITE_KEYS
    if extra:
        raise EvalError(f"{path}: unknown suite key(s) {', '.join(sorted(extra))}")
    bad = set(data.get("sampling") or {}) - _SAMPLING_KEYS
    if bad:
        raise EvalError(f"{path}: unknown sampling key(s) {', '.join(sorted(bad))}")
    budget = (data.get("sampling") or {}).get("token_budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise EvalError(f"{path}: sampling.token_budget must be a positive number of tokens, got {budget!r}")
    shown = (data.get("sampling") or {}).get("tools_prompt", "auto")
    if shown not in TOOLS_PROMPT_MODES:
        raise EvalError(f"{path}: sampling.tools_prompt must be one of {', '.join(TOOLS_PROMPT_MODES)}, got {shown!r}")
    if not isinstance(data.get("tasks"), list) or not data["tasks"]:
        raise EvalError(f"{path}: 'tasks' must be a non-empty list of task sources")
    return data


def load_suite(name_or_path: str | Path) -> Suite:
    """Parse, resolve and pin-check a suite. Every error names the file and the entry."""
    path = resolve_suite_path(name_or_path)
    data = _read_yaml(path)
    tasks: list[Task] = []
    for i, src in enumerate(data["tasks"]):
        where = f"{path}: tasks[{i}]"
        if not isinstance(src, dict):
            raise EvalError(f"{where}: expected a mapping with 'file' or 'domain'")
        chosen = _apply_pins(_tasks_from_source(src, path.parent, where), src.get("pins"), where)
        if not chosen:  # an all-filtered source would evaluate nothing and print a table of NaN
            raise EvalError(f"{where}: this source gives no tasks (empty pins, or n: 0)")
        tasks += chosen
    seen: set[str] = set()
    dups = sorted({t.id for t in tasks if t.id in seen or seen.add(t.id)})
    if dups:
        raise EvalError(f"{path}: duplicate task id(s) across sources: {', '.join(dups[:10])}")
    epochs = int(data.get("epochs", 1))
    if epochs < 1:
        raise EvalError(f"{path}: epochs must be >= 1, got {epochs}")
    return Suite(name=str(data.get("name", path.stem)), path=path, tasks=tuple(tasks), epochs=epochs,
                 seed=int(data.get("seed", 0)), sampling=dict(data.get("sampling") or {}),
                 concurrency={k: int(v) for k, v in (data.get("concurrency") or {}).items()},
                 description=str(data.get("description", "")))
