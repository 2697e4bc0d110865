"""The RL loop on 2 ranks == on 1 rank, and checkpoints resume across world sizes (2 -> 1, 1 -> 2).

Runs (rank_rl.py, tiny model, dapo, 2 minibatches, a KL term to the reference, checkpoint every 2 steps):
  ref   1 process, 4 steps (checkpoints at steps 1 and 3)
  a     2 ranks, 2 steps                                 -> same rows and weights as ref's first 2 steps
  a->b  1 process resumes a's DCP checkpoint to 4 steps  -> ref's 4 steps
  ref'  a copy of ref cut back to its step-1 checkpoint, resumed by 2 ranks to 4 steps -> ref
Rows are compared step by step (no duplicated or missing step). Tolerance: 1e-4 on losses and
grad norms, 1e-4 on weights (float summation order; the sampled tokens come out identical).
"""

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent
TOL = 1e-4
KEYS = ("train/loss", "train/kl", "train/grad_norm", "reward/mean", "completion_tokens/mean", "weights_version")


def run(run_dir, out, steps, world=1, resume=False):
    from posttrain.parallel.launch import run_ranks

    cmd = [sys.executable, str(HERE / "rank_rl.py"), str(run_dir), str(out), str(steps)] + (["resume"] if resume else [])
    code = run_ranks(cmd, world, 60, env={"OMP_NUM_THREADS": "1"}) if world > 1 else subprocess.call(cmd)
    assert code == 0
    return torch.load(out, weights_only=False)


def same_rows(got, want):
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for k in KEYS:
        assert [r.get(k) for r in got] == pytest.approx([r.get(k) for r in want], abs=TOL), k


def same_weights(got, want):
    for k, v in want.items():
        assert (got[k] - v).abs().max() <= TOL, k


@pytest.mark.slow
def test_rl_on_two_ranks_matches_one_and_resumes_across_world_sizes(tmp_path):
    ref = run(tmp_path / "ref", tmp_path / "ref.pt", 4)
    assert any(r.get("train/grad_norm", 0.0) > 0 for r in ref["rows"])  # not vacuous
    assert any(r.get("train/kl", 0.0) > 0 for r in ref["rows"])  # the policy moved away from the reference
    a = run(tmp_path / "a", tmp_path / "a.pt", 2, world=2)
    same_rows(a["rows"], ref["rows"][:2])
    for r in a["rows"]:  # the reference is sharded like the policy, and its gathers are in the comm model
        assert r["train/shard/ref_param_bytes"] == r["train/shard/param_bytes"]
        assert r["train/shard/sent_bytes"] == pytest.approx(r["train/shard/sent_bytes_predicted"], rel=0.1)
    assert (tmp_path / "a" / "checkpoints" / "dcp-step-1" / ".metadata").is_file()
    b = run(tmp_path / "a", tmp_path / "b.pt", 4, resume=True)  # 2 -> 1
    same_rows(b["rows"], ref["rows"])
    same_weights(b["state"], ref["state"])
    cut = tmp_path / "cut"
    shutil.copytree(tmp_path / "ref", cut)
    shutil.rmtree(cut / "checkpoints" / "step-3")
    c = run(cut, tmp_path / "c.pt", 4, world=2, resume=True)  # 1 -> 2
    same_rows(c["rows"], ref["rows"])
    same_weights(c["state"], ref["state"])


def test_dcp_checkpoint_exports_to_a_plain_hf_directory(tmp_path):
    """A one-process DCP save (no process group) exported to safetensors loads back equal."""
    import torch.distributed.checkpoint as dcp
    from transformers import AutoModelForCausalLM

    from posttrain.config import TinyModelConfig
    from posttrain.models.tiny import build_tiny
    from posttrain.parallel.dcp import export_hf

    model, _ = build_tiny(TinyModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1), seed=5)
    model.config.save_pretrained(tmp_path / "cfg")
    with warnings.catch_warnings():  # "no process group: saving in a single process", as intended
        warnings.simplefilter("ignore")
        dcp.save({"model": model.state_dict()}, checkpoint_id=str(tmp_path / "dcp"), no_dist=True)
    out = export_hf(tmp_path / "dcp", tmp_path / "cfg", tmp_path / "hf")
    assert (out / "model.safetensors").is_file()
    back = AutoModelForCausalLM.from_pretrained(out)
    for k, v in model.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
