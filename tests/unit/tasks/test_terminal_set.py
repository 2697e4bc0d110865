"""The terminal regression set: well-formed Harbor folders, sound checks, hack probes score 0.

The whole set's 10x oracle / empty runs are `benchmarks/terminal_images.py`; here a sample
of one task per category is built (the set shares one base image) and checked.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import tomllib

import pytest

from posttrain.tasks.harbor import load_harbor_task
from posttrain.tasks.plan import dump_plan
from posttrain.tasks.terminal_images import SET_DIR, TerminalSet, task_names

SAMPLE = ["fix-median", "refactor-constant", "write-wordfreq", "git-bisect", "log-status-counts", "ini-update", "package-deb",
          "git-recover-branch"]
CATEGORIES = {"fix-build", "fix-test", "refactor", "script", "git", "logs", "data", "config", "packaging"}


def _shell(*cmds: str) -> str:
    return dump_plan([{"tool": "shell", "arguments": {"cmd": c}} for c in cmds] + [{"answer": "done"}])


def test_the_set_has_40_complete_tasks_over_every_category():
    names = task_names()
    assert len(names) >= 40
    cats = set()
    for n in names:
        d = SET_DIR / n
        for f in ("instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
            assert (d / f).is_file(), f"{n}: {f}"
        meta = tomllib.loads((d / "task.toml").read_text())["metadata"]
        cats.add(meta["category"])
        blocks = (d / "solution" / "solve.sh").read_text().count("\n# ---\n") + 1
        assert meta["reference_steps"] == blocks >= 1, n
        assert (d / "tests" / "test.sh").read_text().rstrip().splitlines()[-1].startswith("echo $ok > /logs/verifier/reward.txt")
    assert cats == CATEGORIES


def test_every_task_shares_one_base():
    heads = {(SET_DIR / n / "environment" / "Dockerfile").read_text().split("WORKDIR")[0] for n in task_names()}
    assert len(heads) == 1


@pytest.fixture(scope="module")
def sample_tasks():
    if shutil.which("mmdebstrap") is None or os.geteuid() != 0:
        pytest.skip("building the set's images needs mmdebstrap and root (apt-get install -y mmdebstrap)")
    return {n: load_harbor_task(SET_DIR / n) for n in SAMPLE}


@pytest.fixture(scope="module")
def score(sample_tasks):
    from posttrain.sandbox import SandboxPool
    from posttrain.verifiers.soundness.check import score_once

    loop = asyncio.new_event_loop()
    pool = SandboxPool(concurrency=2)

    def _score(name: str, text: str):
        return loop.run_until_complete(score_once(sample_tasks[name], text, pool))

    yield _score
    loop.run_until_complete(pool.close())
    loop.close()


@pytest.mark.parametrize("name", SAMPLE)
def test_reference_passes_empty_and_fake_fail(score, sample_tasks, name):
    t = sample_tasks[name]
    assert t.environment.image.startswith("sha256:") and t.verifier.name == "image_test"
    assert t.metadata["reference_steps"] == len(re.findall("PT_STEP'", t.oracle))
    assert score(name, t.oracle).score == 1.0
    assert score(name, "").score == 0.0
    assert score(name, TerminalSet().wrong_answer(t, random.Random(0))).score == 0.0


def test_a_planted_interpreter_does_not_reach_the_tests(score):
    fake = "printf '#!/bin/sh\\necho 4.0\\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3 && hash -r"
    assert score("fix-median", _shell(fake)).score == 0.0


def test_a_background_process_cannot_write_the_reward(score):
    writer = "(while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.01; done) >/dev/null 2>&1 &"
    assert score("ini-update", _shell(writer, "sleep 0.2")).score == 0.0


def test_code_the_tests_run_cannot_fake_a_pass(score):
    # stats.py, imported by the tests, writes a reward of 1: the test script writes its own reward last
    hook = "printf 'open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\n' >> stats.py"
    assert score("fix-median", _shell(hook)).score == 0.0


def test_rewriting_git_history_to_match_is_caught(score):
    forge = "git commit -q --allow-empty -m 'change 11' && git rev-parse HEAD > bad_commit.txt"
    assert score("git-bisect", _shell(forge)).score == 0.0
