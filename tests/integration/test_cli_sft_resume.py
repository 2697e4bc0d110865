"""The real `posttrain sft` CLI interrupted with Ctrl-C and continued with `--resume`."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.unit.train.sharded.sft_case import sft_case
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
STEPS = 40  # enough that the interrupt lands mid-run on a quiet machine (a tiny step is ~0.05 s)


def _case(tmp_path):
    cfg_file, over = sft_case(tmp_path)
    return cfg_file, [o for o in over if not o.startswith(("sft.steps", "trainer."))] + [f"sft.steps={STEPS}",
                                                                                       "sft.checkpoint_every=100"]


def _steps(run_dir):
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _weights(run_dir):
    return load_file(str(run_dir / "model" / "model.safetensors"))


def test_interrupted_sft_resumes_to_every_step_once_and_the_uninterrupted_weights(tmp_path):
    cfg_file, over = _case(tmp_path)
    out = tmp_path / "run"
    proc = subprocess.Popen(CLI + ["sft", str(cfg_file), *over, "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600  # a hang guard, not a speed check: the loop leaves once two steps are logged
    while time.time() < deadline and not ((out / "metrics.jsonl").is_file() and len(_steps(out)) >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err[-2000:]
    assert f"resume with: posttrain sft --resume {out}" in err
    done = _steps(out)
    assert 2 <= len(done) < STEPS and done == list(range(len(done)))
    assert not (out / "model").exists()  # the interrupted segment saved a checkpoint, not a model

    r = run_cli(["sft", "--resume", str(out)], cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _steps(out) == list(range(STEPS))

    whole = tmp_path / "whole"
    r = run_cli(["sft", str(cfg_file), *over, "--out", str(whole)], cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    resumed, uninterrupted = _weights(out), _weights(whole)
    assert resumed.keys() == uninterrupted.keys()
    for k, v in uninterrupted.items():
        torch.testing.assert_close(resumed[k], v, rtol=0, atol=1e-6, msg=k)


def test_resume_of_a_directory_that_is_not_a_run_is_one_line(tmp_path):
    r = run_cli(["sft", "--resume", str(tmp_path)], cwd=ROOT, timeout=300)
    assert r.returncode == 2
    assert r.stderr.strip() == f"posttrain: error: --resume {tmp_path}: not a run directory (no config.yaml)"


SHARDED_STEPS = 12  # a 2-rank step is ~0.2 s here: the interrupt after two logged steps lands mid-run


@pytest.mark.extended  # make test-extended: a slow check make test leaves out (docs/benchmarks.md)
def test_interrupted_two_rank_sft_resumes_on_two_ranks_to_every_step_once_and_the_uninterrupted_weights(tmp_path):
    """Ctrl-C reaches rank 0 alone (the launcher hands it on), which checkpoints (DCP shards beside
    step-N/) with rank 1 alive; `--resume` reads trainer.world_size=2 from the run's config.yaml.
    The uninterrupted reference runs in one process: a 2-rank run equals it within the sharded
    tests' tolerance (test_sharded_equivalence.py), so the resumed run must too."""
    cfg_file, over = sft_case(tmp_path)
    over = [o for o in over if not o.startswith("sft.steps")]
    over += [f"sft.steps={SHARDED_STEPS}", "sft.checkpoint_every=100"]
    out, whole = tmp_path / "run", tmp_path / "whole"
    proc = subprocess.Popen(CLI + ["sft", str(cfg_file), *over, "trainer.world_size=2", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600  # a hang guard, not a speed check
    while time.time() < deadline and not ((out / "metrics.jsonl").is_file() and len(_steps(out)) >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err[-2000:]
    assert f"resume with: posttrain sft --resume {out}" in err and "error" not in err  # no rank failed
    done = _steps(out)
    assert 2 <= len(done) < SHARDED_STEPS and done == list(range(len(done)))
    assert (out / "checkpoints" / f"dcp-step-{done[-1]}" / ".metadata").is_file()

    r = run_cli(["sft", "--resume", str(out)], cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _steps(out) == list(range(SHARDED_STEPS))
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["shard/sent_bytes"] > 0  # on 2 ranks
    r = run_cli(["sft", str(cfg_file), *over, "--out", str(whole)], cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    resumed, uninterrupted = _weights(out), _weights(whole)
    assert resumed.keys() == uninterrupted.keys()
    for k, v in uninterrupted.items():  # the sharded tests' tolerance (float summation order)
        torch.testing.assert_close(resumed[k], v, rtol=0, atol=1e-4, msg=k)
