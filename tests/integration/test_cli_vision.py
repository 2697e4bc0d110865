"""The real `posttrain quickstart --vision` CLI on a shrunken tiny VLM run: the tower is
pretrained first, the summary holds the RL gain, both controls and the per-question breakdown,
and the printed table says the same."""

import json
from pathlib import Path
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
SMALL = [f"tasks.domains.{d}.{k}={v}" for d in ("chart", "ui", "drawing") for k, v in (("n_train", 40), ("n_eval", 12))]
SMALL += ["model.vision.pretrain.steps=3", "model.vision.pretrain.batch_size=8", "sft.steps=4", "rl.steps=2", "rl.prompts_per_step=4", "rl.group_size=2", "threads=1"]


def test_vision_quickstart_cli_writes_summary_controls_and_question_breakdown(tmp_path):
    out = tmp_path / "vq"
    r = run_cli(["quickstart", "--vision", "--config",
                        "examples/vision.yaml", "--out", str(out), *SMALL],
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert set(s["rl_gain"]["domains"]) == {"chart", "ui", "drawing"}
    assert {"blank_control", "alt_text_control"} <= set(s)
    q = s["questions"]
    assert {k.split("/")[0] for k in q} == {"chart", "ui", "drawing"}
    assert sum(v["n"] for v in q.values()) == s["rl_gain"]["n"]  # every held-out task in one question type
    assert all(0.0 < v["top_share_to"] <= 1.0 and isinstance(v["top_answer_to"], str) for v in q.values())
    assert all(k in r.stdout for k in q)  # the printed table lists every question type
    assert (out / "final-model" / "processor_config.json").is_file()
    assert len(json.loads((out / "tower_losses.json").read_text())["losses"]) == 3  # the tower was pretrained first
