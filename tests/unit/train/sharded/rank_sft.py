"""The supervised loop with checkpoints on the tiny model, as one process or as each of N ranks.

    python rank_sft.py RUN_DIR STEPS [resume] [dpo]

Without WORLD_SIZE it is the one-process loop (LocalSupervisedTrainer); under launch.run_ranks
rank 0 runs the same loop on the sharded trainer (sharded.supervised.supervised_trainer) and the
other ranks follow. Either way it trains STEPS steps of a CFG.steps-step SFT schedule (with `dpo`:
of a DPO_CFG.steps-step DPO schedule, on rank_job's pairs) and ends with a checkpoint of its last
step in RUN_DIR; `resume` continues from RUN_DIR's newest checkpoint.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # `tests.` (rank_job's data) in a rank's interpreter

from posttrain.builtins import load_builtins  # noqa: E402

load_builtins()  # a rank is its own interpreter: what the CLI and the suite do first

import torch  # noqa: E402

from posttrain.config import DPOConfig, SFTConfig, TrainerConfig  # noqa: E402

CFG = SFTConfig(steps=6, batch_size=4, max_len=64)
DPO_CFG = DPOConfig(steps=4, batch_size=6, lr=1e-3, max_len=64)
TIMEOUT_S = 60.0


def train(run_dir: Path, steps: int, resume: bool = False, kind: str = "sft") -> list[dict]:
    """The loop of this process's place in the job; returns its metric rows (all steps, resumed too)."""
    from posttrain.train.sharded.supervised import supervised_trainer
    from posttrain.train.supervised import train_supervised
    from posttrain.train.supervised_checkpoint import SupervisedCheckpoints
    from tests.unit.train.sharded.rank_job import tiny

    model, tok = tiny()
    cfg, objective = _objective(kind, model, tok.pad_token_id)
    tcfg = TrainerConfig(precision="fp32", mixed_precision="fp32", timeout_s=TIMEOUT_S)
    trainer = supervised_trainer(model, tcfg, cfg.optim, cfg.steps, tok.pad_token_id)
    try:
        return train_supervised(objective, trainer, steps, seed=3,
                                checkpoints=SupervisedCheckpoints(run_dir, tok, 0, resume))
    finally:
        trainer.close()


def _objective(kind: str, model, pad_id: int) -> tuple:
    """(the phase's config, its objective); DPO's reference is the untrained model, as the recipe's."""
    if kind == "sft":
        from posttrain.train.sft import EncodedSFT
        from tests.unit.train.sharded.rank_job import sft_items

        return CFG, EncodedSFT(sft_items(), CFG, pad_id)
    from posttrain.train.dpo import PairObjective, reference_logprobs
    from tests.unit.train.sharded.rank_job import dpo_pairs

    pairs = dpo_pairs()
    return DPO_CFG, PairObjective(pairs, reference_logprobs(model, pairs, pad_id, DPO_CFG.max_len), DPO_CFG, pad_id)


def main() -> int:
    run_dir, steps, flags = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        from posttrain.parallel.mesh import init_group

        init_group(TIMEOUT_S)
        if int(os.environ["RANK"]) > 0:
            import posttrain.train.sharded.session  # noqa: F401  (every handler)
            from posttrain.parallel.group import follow_and_exit

            follow_and_exit(int(os.environ["RANK"]), world, TIMEOUT_S)
    train(run_dir, steps, "resume" in flags, "dpo" if "dpo" in flags else "sft")
    return 0


if __name__ == "__main__":
    sys.exit(main())
