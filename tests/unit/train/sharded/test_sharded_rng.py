"""Every rank of a sharded run gets its own RNG states back on resume (train/sharded/checkpoint.py).

One 2-rank job (rank_rng.py) serves the tests here: the ranks' states are made to differ, a step is
checkpointed, the states are moved, the checkpoint is resumed; then a one-process checkpoint is
resumed on the same 2 ranks. Exact equality: a generator state is restored or it is not.
"""

import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """{"saved", "restored", "widened": [rank 0's state, rank 1's]} and the one-process checkpoint's state."""
    from posttrain.parallel.launch import run_ranks
    from posttrain.train.checkpoint import latest_checkpoint, load_trainer_state
    from tests.unit.train.sharded.rank_sft import train

    tmp = tmp_path_factory.mktemp("rng")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the fixture's one-process step: tiny tensors (the suite's one_torch_thread)
    try:
        train(tmp / "one", 1)  # one process, one step: a checkpoint with rank 0's state only
    finally:
        torch.set_num_threads(threads)
    cmd = [sys.executable, str(HERE / "rank_rng.py"), str(tmp / "run"), str(tmp / "one"), str(tmp / "out.pt")]
    code = run_ranks(cmd, 2, 60, env={"OMP_NUM_THREADS": "1"})
    assert code == 0
    out = torch.load(tmp / "out.pt", weights_only=False)
    out["one"] = load_trainer_state(latest_checkpoint(tmp / "one"))["rng"]
    return out


def test_each_rank_resumes_its_own_rng_states_at_the_same_world_size(job):
    from tests.unit.train.sharded.rank_rng import same_state

    saved, restored = job["saved"], job["restored"]
    assert not same_state(saved[0], saved[1])  # not vacuous: the ranks' states differ
    for rank in (0, 1):
        assert same_state(restored[rank], saved[rank]), rank


def test_a_rank_the_checkpoint_has_no_state_for_takes_rank_0s(job):
    """1 -> 2: a one-process checkpoint holds rank 0's states only; rank 1 resumes with those."""
    from tests.unit.train.sharded.rank_rng import same_state

    for rank in (0, 1):
        assert same_state(job["widened"][rank], job["one"]), rank
