"""Freeze generated tasks into a pinned suite: a task file plus a YAML that pins versions.

    freeze_suite("regression", {"arithmetic": 14, "code": 12, "math": 10}, out_dir, epochs=5)

    python -m posttrain.eval.freeze          # rebuilds the built-in suites in posttrain/eval/suites/
    python -m posttrain.eval.freeze terminal # just one

Tasks come from the held-out evaluation seed (10_000, as `TasksConfig.eval_seed`) so a
suite never overlaps the default training split. Rebuilding changes pins only when the
generators or the Task format changed; that diff is what a reviewer should look at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from posttrain.eval.suite import BUILTIN_DIR
from posttrain.tasks.reasoning_gym import shipped as rg_shipped

EVAL_SEED = 10_000
DEFAULT_SAMPLING = {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 24}
DEFAULT_CONCURRENCY = {"generation": 256, "sandboxes": 2}

# The built-ins: one suite per shipped domain, and the cross-domain regression set (20-50
# tasks, the seeds' recommendation for comparing before/after an upgrade). Each entry:
# (tasks per domain, epochs, description, max_new_tokens or None for the tasks' own limit).
BUILTINS: dict[str, tuple[dict[str, int], int, str, int | None]] = {
    "arithmetic": ({"arithmetic": 50}, 1, "Integer arithmetic, exact numeric answers.", 24),
    "code": ({"code": 50}, 1, "Python expressions checked by tests in the sandbox.", 24),
    "math": ({"math": 30}, 1, "Fraction/percent word problems with boxed answers.", 24),
    "humaneval": ({"humaneval": 30}, 1, "HumanEval functions run against their tests in the sandbox.", None),
    "extraction": ({"extraction": 30}, 1, "JSON extraction checked against a schema and the gold fields.", None),
    "needle": ({"needle": 20}, 1, "Long-context retrieval with a cited passage.", None),
    "conflict": ({"conflict": 20}, 1, "Multi-document conflicts answered with citations.", None),
    "terminal": ({"terminal": 12}, 1, "Multi-step shell work in a sandbox session, checked on the final files.",
                 None),
    "tools": ({"tools": 20}, 1, "Multi-tool agent tasks (calculator, lookup, ...), checked on the answer.", None),
    "scene": ({"scene": 10}, 1, "3D scenes built through tool calls, checked on the final scene.", None),
    "chart": ({"chart": 30}, 1, "Bar-chart questions on rendered images (needs a vision-language model).", None),
    "drawing": ({"drawing": 30}, 1, "Shape-counting questions on drawings (needs a vision-language model).", None),
    "ui": ({"ui": 30}, 1, "Screenshot questions on rendered UIs (needs a vision-language model).", None),
    # The real benchmarks (optional packages, `benchmarks` extra): each one's whole held-out split.
    "math500": ({"math500": 10_000}, 1, "MATH-500 (MMATH's integer-answer subset), held-out split, math-verify.", None),
    "aime": ({"aime": 10_000}, 1, "AIME 2024 + 2025, held-out split, graded by math-verify.", None),
    "ifbench": ({"ifbench": 10_000}, 1, "IFBench prompts, held-out split, strict all-or-nothing constraints.", None),
    "regression": ({"arithmetic": 14, "code": 12, "math": 10}, 5,
                   "Default regression set: 36 tasks across domains, 5 epochs.", 24),
    # The reasoning-gym family (`reasoning_gym` extra): 3 level-1 tasks of every shipped rg-* generator.
    "reasoning_gym": ({f"rg-{g}": 3 for g in rg_shipped()}, 1,
                      "reasoning-gym: 3 difficulty-1 tasks of each of its 102 shipped generators, rg_answer checker.", None),
}


def freeze_suite(name: str, counts: dict[str, int], out_dir: Path, epochs: int = 1, description: str = "",
                 seed: int = EVAL_SEED, difficulty: float = 1.0, max_new_tokens: int | None = 24) -> Path:
    """Generate, save and pin a suite. `max_new_tokens=None` takes the largest single-turn task
    limit (agent steps always use each task's own per-step limit)."""
    from posttrain.tasks import generate_domain
    from posttrain.tasks.io import save_tasks

    tasks = []
    for domain, n in counts.items():
        tasks += generate_domain(domain, n, seed, difficulty)
    if max_new_tokens is None:
        max_new_tokens = max((t.limits.max_new_tokens for t in tasks), default=DEFAULT_SAMPLING["max_new_tokens"])
    task_file = Path("tasks") / f"{name}.jsonl"
    save_tasks(tasks, out_dir / task_file)
    doc: dict[str, Any] = {
        "name": name, "description": description, "epochs": epochs, "seed": 0,
        "sampling": {**DEFAULT_SAMPLING, "max_new_tokens": max_new_tokens}, "concurrency": DEFAULT_CONCURRENCY,
        "tasks": [{"file": str(task_file), "pins": {t.id: t.version for t in tasks}}],
    }
    path = out_dir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# Suites that mix difficulties: name -> (domain, {difficulty: count}, description). Each
# difficulty draws from its own seed (EVAL_SEED + difficulty) so that ids never collide.
MIXED: dict[str, tuple[str, dict[int, int], str]] = {
    "blender_scene": ("blender_scene", {0: 8, 1: 8, 2: 7, 3: 7},
                      "Regression set: 30 scenes built in a real Blender (difficulty 0-3: relations, materials, "
                      "light, arrays, booleans, camera), checked on the saved .blend; needs `make blender`."),
}


def freeze_mixed(name: str, out_dir: Path) -> Path:
    from posttrain.tasks import generate_domain
    from posttrain.tasks.io import save_tasks

    domain, counts, desc = MIXED[name]
    tasks = [t for d, n in counts.items() for t in generate_domain(domain, n, EVAL_SEED + d, float(d))]
    task_file = Path("tasks") / f"{name}.jsonl"
    save_tasks(tasks, out_dir / task_file)
    doc: dict[str, Any] = {
        "name": name, "description": desc, "epochs": 1, "seed": 0,
        "sampling": {**DEFAULT_SAMPLING, "max_new_tokens": max(t.limits.max_new_tokens for t in tasks)},
        "concurrency": DEFAULT_CONCURRENCY, "tasks": [{"file": str(task_file), "pins": {t.id: t.version for t in tasks}}],
    }
    path = out_dir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> None:
    """Rebuild the named built-ins (all when none is named)."""
    import sys

    import posttrain.tasks.math_problems  # noqa: F401  (registers the math domain)

    names = (sys.argv[1:] if argv is None else argv) or [*BUILTINS, *MIXED]
    unknown = [n for n in names if n not in BUILTINS and n not in MIXED]
    if unknown:
        raise SystemExit(f"unknown built-in suite(s) {', '.join(unknown)}; known: {', '.join([*BUILTINS, *MIXED])}")
    for name in names:
        if name in MIXED:
            print(freeze_mixed(name, BUILTIN_DIR))
            continue
        counts, epochs, desc, max_new = BUILTINS[name]
        print(freeze_suite(name, counts, BUILTIN_DIR, epochs, desc, max_new_tokens=max_new))


if __name__ == "__main__":
    main()
