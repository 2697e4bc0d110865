"""Freeze generated tasks into a pinned suite: a task file plus a YAML that pins versions.

    freeze_suite("regression", {"arithmetic": 14, "code": 12, "math": 10}, out_dir, epochs=5)

    python -m posttrain.eval.freeze          # rebuilds the built-in suites in posttrain/eval/suites/

Tasks come from the held-out evaluation seed (10_000, as `TasksConfig.eval_seed`) so a
suite never overlaps the default training split. Rebuilding changes pins only when the
generators or the Task format changed; that diff is what a reviewer should look at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from posttrain.eval.suite import BUILTIN_DIR

EVAL_SEED = 10_000
DEFAULT_SAMPLING = {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 24}
DEFAULT_CONCURRENCY = {"generation": 256, "sandboxes": 2}

# The built-ins: one suite per shipped single-turn domain, and the cross-domain regression set
# (20-50 tasks, the seeds' recommendation for comparing before/after an upgrade).
BUILTINS: dict[str, tuple[dict[str, int], int, str]] = {
    "arithmetic": ({"arithmetic": 50}, 1, "Integer arithmetic, exact numeric answers."),
    "code": ({"code": 50}, 1, "Python expressions checked by tests in the sandbox."),
    "math": ({"math": 30}, 1, "Fraction/percent word problems with boxed answers."),
    "regression": ({"arithmetic": 14, "code": 12, "math": 10}, 5,
                   "Default regression set: 36 tasks across domains, 5 epochs."),
}


def freeze_suite(name: str, counts: dict[str, int], out_dir: Path, epochs: int = 1, description: str = "",
                 seed: int = EVAL_SEED, difficulty: float = 1.0) -> Path:
    from posttrain.tasks import generate_domain
    from posttrain.tasks.io import save_tasks

    tasks = []
    for domain, n in counts.items():
        tasks += generate_domain(domain, n, seed, difficulty)
    task_file = Path("tasks") / f"{name}.jsonl"
    save_tasks(tasks, out_dir / task_file)
    doc: dict[str, Any] = {
        "name": name, "description": description, "epochs": epochs, "seed": 0,
        "sampling": DEFAULT_SAMPLING, "concurrency": DEFAULT_CONCURRENCY,
        "tasks": [{"file": str(task_file), "pins": {t.id: t.version for t in tasks}}],
    }
    path = out_dir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main() -> None:
    import posttrain.tasks.math_problems  # noqa: F401  (registers the math domain)

    for name, (counts, epochs, desc) in BUILTINS.items():
        print(freeze_suite(name, counts, BUILTIN_DIR, epochs, desc))


if __name__ == "__main__":
    main()
