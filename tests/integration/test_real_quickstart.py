"""`posttrain quickstart --model smollm2-135m-instruct` through the real CLI, at a tiny size:
the real SmolLM2 weights and tokenizer, the real BFCL and IFBench splits, GRPO with LoRA.

About 60 s on a quiet 2-core machine (model load, 6 held-out tasks twice, one RL step of
2 x 2 samples at 8 tokens); the subprocess limit is generous because a loaded shared
machine runs it many times slower. Needs a converted SmolLM2 (`posttrain models get
smollm2-135m-instruct --out DIR`, found as in tests/unit/rollout/chat_fixtures.py) and the
benchmark packages; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.rollout.chat_fixtures import real_smollm2_dir

ROOT = Path(__file__).resolve().parents[2]
SMOL = real_smollm2_dir()
TINY = ["tasks.domains.bfcl.n_train=4", "tasks.domains.bfcl.n_eval=3", "tasks.domains.ifbench.n_train=2",
        "tasks.domains.ifbench.n_eval=3", "rl.steps=1", "rl.prompts_per_step=2", "rl.group_size=2",
        "rl.max_new_tokens=8", "eval.max_new_tokens=8", "rl.optim.warmup=0"]


def _packages_missing() -> str:
    from posttrain.errors import PosttrainError
    from posttrain.registry import build

    try:
        for d in ("bfcl", "ifbench"):
            build(d, kind="domain")
    except PosttrainError as e:
        return str(e)
    return ""


pytestmark = pytest.mark.skipif(SMOL is None, reason="no converted SmolLM2 directory")


def _quickstart(tmp_path, *args):
    env = {**os.environ, "POSTTRAIN_MODELS_DIR": str(tmp_path / "models")}
    return subprocess.run([sys.executable, "-m", "posttrain.cli.main", "quickstart", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)


@pytest.mark.timeout(1200)
def test_quickstart_model_runs_the_real_recipe_and_writes_summary_and_report(tmp_path):
    missing = _packages_missing()
    if missing:
        pytest.skip(missing)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smollm2-135m-instruct").symlink_to(SMOL.resolve())  # the catalog name resolves here
    out = tmp_path / "run"
    r = _quickstart(tmp_path, "--model", "smollm2-135m-instruct", "--out", str(out), *TINY)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert set(s["before"]["domains"]) == set(s["after"]["domains"]) == {"bfcl", "ifbench"}
    assert s["n_tasks"] + s["infra_errors"]["before"] == 6
    for side in ("before", "after"):
        for d, (lo, hi) in s[side]["ci95"].items():
            assert 0.0 <= lo <= s[side]["domains"][d] <= hi <= 1.0
    assert 0.0 <= s["p_value"] <= 1.0
    report = (out / "report.md").read_text()
    assert "| bfcl |" in report and "| ifbench |" in report and "McNemar" in report
    cfg = (out / "config.yaml").read_text()
    assert str(SMOL.resolve()) in cfg and "lora" in cfg
    assert not (out / "sft-model").exists()  # no warm-up copy of the 540 MB weights
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert [x["step"] for x in rows if "reward/mean" in x] == [0]
    assert "held-out pass@1" in r.stdout


def test_quickstart_model_unknown_name_is_one_line(tmp_path):
    r = _quickstart(tmp_path, "--model", "no-such-model", "--out", str(tmp_path / "run"))
    assert r.returncode != 0
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "no-such-model" in lines[0] and "smollm2-135m-instruct" in lines[0]
