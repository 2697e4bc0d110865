"""Harbor folders with a Dockerfile: the image is built with every RUN line, episodes and tests run in it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from posttrain.tasks.harbor import load_harbor_tasks
from posttrain.testing.cli_fork import run_cli

HEAD = (Path(__file__).parents[3] / "posttrain/tasks/terminal_set/fix-median/environment/Dockerfile").read_text().split("WORKDIR")[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    if shutil.which("mmdebstrap") is None or os.geteuid() != 0:
        pytest.skip("building a Dockerfile's image needs mmdebstrap and root (apt-get install -y mmdebstrap)")
    d = tmp_path_factory.mktemp("harbor") / "greet"
    for sub in ("tests", "solution", "environment/app"):
        (d / sub).mkdir(parents=True)
    (d / "task.toml").write_text('version = "1.0"\n[metadata]\ndifficulty = "easy"\n[verifier]\ntimeout_sec = 30\n')
    (d / "instruction.md").write_text("Write the marker the image holds in /opt/marker, upper-cased, to /app/out.txt.\n")
    (d / "environment" / "Dockerfile").write_text(HEAD + "RUN echo built-by-run > /opt/marker\nWORKDIR /app\nCOPY app/ /app/\n")
    (d / "environment" / "app" / "notes.txt").write_text("starting file\n")
    (d / "tests" / "test.sh").write_text('#!/bin/bash\nr=0; [ "$(cat /app/out.txt)" = BUILT-BY-RUN ] && [ -f /app/notes.txt ] && r=1\n'
                                         'echo $r > /logs/verifier/reward.txt\n')
    (d / "solution" / "solve.sh").write_text("tr a-z A-Z < /opt/marker > /app/out.txt\n")
    return d


def test_the_task_names_its_built_image(folder):
    (t,) = load_harbor_tasks(folder)
    assert t.environment.image.startswith("sha256:") and t.verifier.name == "image_test" and dict(t.environment.files) == {}
    assert t.verifier.args["tests"]["test.sh"].count("/logs/verifier/reward.txt") == 1  # paths stay as written


def test_reference_passes_and_empty_and_probes_fail(folder):
    from posttrain.sandbox import SandboxPool
    from posttrain.verifiers.soundness.probe_check import probe_tasks
    from posttrain.verifiers.soundness.check import score_once

    (t,) = load_harbor_tasks(folder)

    async def go():
        pool = SandboxPool(concurrency=2)
        try:
            scores = [(await score_once(t, text, pool)).score for text in (t.oracle, "")]
            return scores, await probe_tasks("harbor", [t], repeats=1, sandbox=pool)
        finally:
            await pool.close()

    scores, report = asyncio.run(go())
    assert scores == [1.0, 0.0]
    assert report.hack_pass_rate == 0.0 and report.oracle_rl_pass_rate == 1.0, report.failures


def test_cli_import_writes_tasks_naming_the_image(folder, tmp_path):
    out = tmp_path / "t.jsonl"
    r = run_cli(["tasks", "import", str(folder), "--out", str(out)],
                       timeout=300)
    assert r.returncode == 0, r.stderr
    row = json.loads(out.read_text().splitlines()[0])
    assert row["environment"]["image"].startswith("sha256:")
