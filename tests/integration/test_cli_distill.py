"""The real `posttrain distill` CLI on the tiny model: examples/distill.yaml with the tiny student and a
sharpened copy of it as the teacher (the SmolLM2 student and RL teacher swapped out), the run directory,
the reverse KL to the teacher going down, Ctrl-C and --resume, and a bad teacher refused before any
model loads."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from posttrain.testing import cli_fork

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
EXAMPLE = "examples/distill.yaml"
# The example on the tiny model: arithmetic (the tiny tokenizer cannot spell BFCL's JSON), full fine-tuning
# at the rate that moves it in a few steps (tests/unit/second/test_distill.py), short completions.
TINY = ["model.path=null", "trainer.lora=null", "engine.name=hf", "engine.args={}", "threads=1",
        "tasks.domains.bfcl.n_train=0", "tasks.domains.bfcl.n_eval=0",
        "tasks.domains.arithmetic.n_train=40", "tasks.domains.arithmetic.n_eval=10",
        "tasks.domains.arithmetic.difficulty=1.0", "rl.prompts_per_step=2", "rl.group_size=16",
        "rl.max_new_tokens=4", "eval.max_new_tokens=4", "rl.optim.lr=3.0e-3", "rl.optim.betas=[0.9,0.999]"]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """The tiny student's own initialisation with its output layer sharpened (logits x3): ~2 nats of
    reverse KL from the student, a teacher it can reach in a few steps."""
    import torch

    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    with torch.no_grad():
        model.lm_head.weight.mul_(3.0)
    return str(save_policy(model, tok, tmp_path_factory.mktemp("teacher") / "model"))


def run_cli(*args, timeout=240):
    return cli_fork.run_cli(list(args), cwd=ROOT, timeout=timeout)


def metric_rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def distilled(tmp_path_factory, teacher):
    """One 6-step `posttrain distill` run of the example on the tiny model: (run directory, CLI result)."""
    out = tmp_path_factory.mktemp("distill") / "run"
    r = run_cli("distill", EXAMPLE, *TINY, f"distill.teacher.path={teacher}", "rl.steps=6", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out, r


def test_distill_lowers_the_students_reverse_kl_to_the_teacher(distilled, teacher):
    out, r = distilled
    rows = metric_rows(out)
    assert [row["step"] for row in rows] == list(range(6))
    assert all("train/reverse_kl" in row for row in rows)  # the distillation loss's own statistic, every step
    d = json.loads((out / "summary.json").read_text())["distill"]
    assert d["teacher"] == teacher
    assert d["reverse_kl_after"] < 0.9 * d["reverse_kl_before"], d  # exact, on held-out completions
    assert "before distillation" in r.stdout and "held-out reverse KL to the teacher" in r.stdout
    assert (out / "checkpoints" / "step-5" / "config.json").is_file()


def test_every_step_reports_the_teachers_share_of_its_time(distilled):
    for row in metric_rows(distilled[0]):
        assert 0 < row["time/teacher_s"] < row["time/update_s"], row  # the teacher's forward is in the update phase
        assert row["time/teacher_frac"] == pytest.approx(row["time/teacher_s"] / row["time/step_s"])


def test_ctrl_c_keeps_a_checkpoint_and_resume_finishes_every_step_once(tmp_path, teacher):
    out = tmp_path / "run"
    args = CLI + ["distill", EXAMPLE, *TINY, f"distill.teacher.path={teacher}", "rl.steps=12", "rl.checkpoint_every=100",
                  "rl.group_size=4", "--out", str(out)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while time.time() < deadline:  # interrupt once the 2nd step is logged
        if (out / "metrics.jsonl").is_file() and len(metric_rows(out)) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "--resume" in err
    assert 2 <= len(metric_rows(out)) < 12 and any((out / "checkpoints").iterdir())
    r = run_cli("distill", "--resume", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert [row["step"] for row in metric_rows(out)] == list(range(12))
    assert json.loads((out / "summary.json").read_text())["distill"]["reverse_kl_after"] is not None


def _other_tokenizer_model(root: Path) -> str:
    """The tiny model's weights with a 51-word tokenizer: a teacher that cannot score the student's tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    path = save_policy(*build_tiny(seed=2), root / "other")
    core = Tokenizer(models.WordLevel({f"w{i}": i for i in range(50)} | {"<eos>": 50}, unk_token="w0"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", pad_token="w0").save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("teacher_arg,expect", [
    ("distill.teacher=null", "distill.teacher: missing"),
    ("distill.teacher.path=/nonexistent/teacher", "distill.teacher.path: model directory not found: /nonexistent/teacher"),
    ("OTHER", "distill.teacher.path: the student tiny and the teacher"),
    ("distill.teacher={url: 'http://127.0.0.1:1/v1'}", "distill.teacher.url=http://127.0.0.1:1/v1"),
    ("rl.loss=grpo", "rl.loss=grpo: posttrain distill trains with rl.loss=distill"),
])
def test_a_bad_teacher_is_refused_in_one_line_before_any_model_loads(tmp_path, teacher_arg, expect):
    out = tmp_path / "run"
    arg = f"distill.teacher.path={_other_tokenizer_model(tmp_path)}" if teacher_arg == "OTHER" else teacher_arg
    r = run_cli("distill", EXAMPLE, *TINY, arg, "--out", str(out), timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert expect in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not out.exists()  # nothing claimed, no base model written
