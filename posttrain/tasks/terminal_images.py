"""`terminal_set`: posttrain's own regression set of terminal tasks, in real pinned images.

The tasks live in `posttrain/tasks/terminal_set/<name>/` in the Harbor folder format
(task.toml, instruction.md, environment/Dockerfile, tests/test.sh, solution/solve.sh)
and are loaded with `load_harbor_tasks`, which builds each Dockerfile's image (they share
one Debian bookworm base with python3, git, jq, make and procps, so the set builds the
base once and then one small layer or two per task). Categories: fixing a failing build or
test, refactoring, writing a script from a spec, git operations (bisect, rebase, squash,
recovering a lost branch, conflicts, cherry-pick, revert, tags), log and data wrangling
with standard tools, configuration edits and packaging. Each task records its reference
step count (`metadata.reference_steps`, the blocks of solve.sh).

Tests check behaviour on inputs the episode never saw, or recompute the expected result
from a pristine copy of the data under /tests; git tasks compare against commit and tree
hashes fixed by the task's deterministic set-up (GIT_*_DATE are pinned in the image).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from posttrain.registry import domain
from posttrain.tasks.plan import dump_plan
from posttrain.types import Task

SET_DIR = Path(__file__).with_name("terminal_set")

# A candidate that fakes its way: plants a reward and a test for a later check, edits the
# places tests live, and writes plausible output files without doing the work.
FAKE = ("mkdir -p /logs/verifier /tests tests && echo 1 > /logs/verifier/reward.txt && "
        "printf '#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n' | tee /tests/test.sh tests/test.sh >/dev/null; "
        "for f in report.txt emails.txt totals.csv stats.json bad_commit.txt crontab; do echo ok > \"$f\"; done")


def task_names() -> list[str]:
    return sorted(p.name for p in SET_DIR.iterdir() if (p / "task.toml").is_file())


@domain("terminal_set")
class TerminalSet:
    name = "terminal_set"

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        """The first `n` tasks of the set in name order (all of them for n >= the set's size); builds their images."""
        from posttrain.tasks.harbor import load_harbor_task

        names = task_names()
        if n < len(names):
            names = sorted(random.Random(f"terminal_set:{seed}").sample(names, n))
        return [dataclasses.replace(load_harbor_task(SET_DIR / name), domain=self.name) for name in names]

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        return dump_plan([{"tool": "shell", "arguments": {"cmd": FAKE}}, {"answer": "done"}])
