"""A 2-rank DPO run checkpointed mid-way and resumed on 2 ranks ends at the uninterrupted run.

Runs (rank_sft.py with `dpo`: tiny model, rank_job's pairs, a 4-step schedule, a checkpoint at
each segment's end):
  whole  1 process, steps 0..3
  cut    2 ranks, steps 0..1                 -> step-1: DCP shards beside it
  2->2   2 fresh ranks resume cut, steps 2..3 -> whole's rows and weights
The reference is one process: 2 ranks equal it within the sharded tests' tolerance
(test_sharded_equivalence.py), so the resumed run must too. 1e-4 on rows and weights.
"""

import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

HERE = Path(__file__).parent
TOL = 1e-4

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_dpo_on_two_ranks_resumed_on_two_ranks_ends_at_the_uninterrupted_rows_and_weights(tmp_path):
    from posttrain.parallel.launch import run_ranks
    from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state
    from tests.unit.train.sharded.rank_sft import DPO_CFG, train

    whole = train(tmp_path / "whole", DPO_CFG.steps, kind="dpo")
    run = tmp_path / "run"
    for steps, resume in ((2, []), (DPO_CFG.steps, ["resume"])):
        code = run_ranks([sys.executable, str(HERE / "rank_sft.py"), str(run), str(steps), *resume, "dpo"], 2, 60,
                         env={"OMP_NUM_THREADS": "1"})
        assert code == 0
        ts = load_trainer_state(latest_checkpoint(run))
        assert ts["step"] == steps - 1 and ts["world_size"] == 2 and "dcp" in ts  # each segment's own shards
    rows = ts["history"]
    for key in ("loss", "grad_norm", "lr", "accuracy", "margin"):  # every step once; all on 2 ranks
        assert [r[key] for r in rows] == pytest.approx([r[key] for r in whole], abs=TOL), key
    assert all(r["shard/sent_bytes"] > 0 for r in rows)
    got = load_file(str(latest_checkpoint(run) / "model.safetensors"))  # gathered by rank 0
    want = load_file(str(latest_checkpoint(tmp_path / "whole") / "model.safetensors"))
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert (got[k] - v).abs().max() <= TOL, k
