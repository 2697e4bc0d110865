"""Each rank's RNG states through the supervised loop's checkpoints, run as each of 2 ranks.

    python rank_rng.py RUN_DIR ONE_DIR OUT.pt     # under launch.run_ranks; ONE_DIR: a one-process checkpoint

Rank 0, with the other ranks following (rank_sft.py's SFT case and trainer, one step each):
  saved     every rank draws a rank-dependent amount (so the ranks' states differ), then one step
            checkpointed into RUN_DIR
  restored  every rank draws again (the states move away), then RUN_DIR is resumed
  widened   ONE_DIR (written by one process: no state for rank 1) is resumed
OUT.pt: {name: [rank 0's rng_state(), rank 1's]} for each of the three moments.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # `tests.` in a rank's interpreter

from posttrain.builtins import load_builtins  # noqa: E402

load_builtins()  # a rank is its own interpreter: what the CLI and the suite do first

import numpy as np  # noqa: E402
import torch  # noqa: E402

from posttrain.parallel.group import handler  # noqa: E402


@handler("test_draw")
def _draw(ctx, p) -> None:
    """Advance python, numpy and torch by an amount that depends on the rank."""
    import random

    import torch.distributed as dist

    n = 3 * (dist.get_rank() + 1)
    for _ in range(n):
        random.random()
    np.random.rand(n)
    torch.rand(n)


@handler("test_states")
def _states(ctx, p) -> list:
    """Every rank's rng_state(), on rank 0."""
    import torch.distributed as dist

    from posttrain.train.checkpoint import rng_state

    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, rng_state())
    return out


def same_state(a: dict, b: dict) -> bool:
    """Two rng_state() dicts hold the same generator states."""
    if a.keys() != b.keys() or a["python"] != b["python"] or not torch.equal(a["torch"], b["torch"]):
        return False
    if "cuda" in a and not torch.equal(a["cuda"], b["cuda"]):
        return False
    na, nb = a["numpy"], b["numpy"]
    return na[0] == nb[0] and np.array_equal(na[1], nb[1]) and tuple(na[2:]) == tuple(nb[2:])


def main() -> int:
    run_dir, one_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    from posttrain.parallel.mesh import init_group

    init_group(60.0)
    if int(os.environ["RANK"]) > 0:
        import posttrain.train.sharded.session  # noqa: F401  (every handler)
        from posttrain.parallel.group import follow_and_exit

        follow_and_exit(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), 60.0)

    from posttrain.config import TrainerConfig
    from posttrain.train.sft import EncodedSFT
    from posttrain.train.sharded.supervised import ShardedSupervisedTrainer
    from posttrain.train.supervised import train_supervised
    from posttrain.train.supervised_checkpoint import SupervisedCheckpoints
    from tests.unit.train.sharded.rank_job import sft_items, tiny
    from tests.unit.train.sharded.rank_sft import CFG

    model, tok = tiny()
    tcfg = TrainerConfig(precision="fp32", mixed_precision="fp32", timeout_s=60.0)
    trainer = ShardedSupervisedTrainer.start(model, tcfg, CFG.optim, CFG.steps, tok.pad_token_id)
    objective = EncodedSFT(sft_items(), CFG, tok.pad_token_id)
    call = trainer.sh.driver.call

    def one_step(d: Path, resume: bool) -> None:  # resumed at step 1 of 1: restore only, no step
        train_supervised(objective, trainer, 1, seed=3, checkpoints=SupervisedCheckpoints(d, tok, 0, resume))

    result = {}
    try:
        call("test_draw")
        one_step(run_dir, resume=False)
        result["saved"] = call("test_states")
        call("test_draw")
        one_step(run_dir, resume=True)
        result["restored"] = call("test_states")
        one_step(one_dir, resume=True)
        result["widened"] = call("test_states")
    finally:
        trainer.close()
    torch.save(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
