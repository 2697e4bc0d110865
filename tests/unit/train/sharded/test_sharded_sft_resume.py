"""Supervised checkpoints resume across world sizes (1 -> 2 -> 1) to the one-process run.

Runs (rank_sft.py: tiny model, SFT, a 6-step schedule, a checkpoint at each segment's end):
  whole  1 process, steps 0..5
  cut    1 process, steps 0..1                       -> step-1: plain weights and AdamW state
  1->2   2 ranks resume cut, steps 2..3              -> step-3: DCP shards beside it
  2->1   1 process resumes those shards, steps 4..5  -> whole's rows and weights
Tolerance: 1e-4 on losses, grad norms and weights (float summation order over 2 ranks), as the
other sharded tests.
"""

import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent
TOL = 1e-4

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_sft_checkpoints_resume_from_one_process_on_two_ranks_and_back_to_the_one_process_run(tmp_path):
    from posttrain.parallel.launch import run_ranks
    from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state
    from tests.unit.train.sharded.rank_sft import CFG, train

    whole = train(tmp_path / "whole", CFG.steps)
    train(tmp_path / "run", 2)
    code = run_ranks([sys.executable, str(HERE / "rank_sft.py"), str(tmp_path / "run"), "4", "resume"], 2, 60,
                     env={"OMP_NUM_THREADS": "1"})
    assert code == 0
    ts = load_trainer_state(latest_checkpoint(tmp_path / "run"))
    assert ts["step"] == 3 and ts["world_size"] == 2 and "optimizer" not in ts  # the 2-rank segment's shards
    resumed = train(tmp_path / "run", CFG.steps, resume=True)
    for key in ("loss", "grad_norm", "lr"):  # every step once; steps 2..3 trained on 2 ranks
        assert [r[key] for r in resumed] == pytest.approx([r[key] for r in whole], abs=TOL), key
    assert any(r.get("shard/sent_bytes", 0) > 0 for r in resumed[2:4])
    got, want = _final(tmp_path / "run"), _final(tmp_path / "whole")
    for k, v in want.items():
        assert (got[k] - v).abs().max() <= TOL, k


def _final(run_dir: Path) -> dict[str, torch.Tensor]:
    from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state

    return load_trainer_state(latest_checkpoint(run_dir))["weights"]
