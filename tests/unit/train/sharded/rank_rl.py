"""The RL loop on the tiny model, run by the tests as one process or as each of N ranks.

    python rank_rl.py RUN_DIR OUT.pt STEPS [resume]

Without WORLD_SIZE it is the one-process loop; under launch.run_ranks rank 0 runs the same
loop on the sharded trainer and the other ranks follow. OUT.pt: {"rows", "state"}.
"""

from __future__ import annotations

from posttrain.builtins import load_builtins

load_builtins()  # a rank is its own interpreter: what the CLI and the suite do first

import asyncio
import dataclasses
import os
import sys
from pathlib import Path

import torch

from posttrain.registry import verifier
from posttrain.types import Spec, VerifyResult


@verifier("sharded_test_digit_match", answer_format="line")
class DigitMatch:
    """Partial credit, so an untrained policy already has reward variance (and gradients)."""

    async def __call__(self, task, traj, ctx):
        text, want = traj.completion_text.strip(), task.oracle
        score = sum(a == b for a, b in zip(text, want)) / max(len(want), len(text), 1)
        return VerifyResult(score, score == 1.0)


def overrides(steps: int) -> list[str]:
    return ["seed=3", f"rl.steps={steps}", "rl.prompts_per_step=4", "rl.group_size=4", "rl.max_new_tokens=6",
            "rl.checkpoint_every=2", "rl.keep_checkpoints=4", "rl.lr=3e-3", "rl.loss=dapo", "rl.minibatches=2",
            "rl.kl_coef=0.05",  # a KL term to the (sharded) reference, resumed with the run
            "tasks.domains={arithmetic: {n_train: 12, n_eval: 4}}", "model.tiny.hidden_size=32",
            "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2",
            "trainer.mixed_precision=fp32", "trainer.timeout_s=60"]


def main() -> int:
    run_dir, out, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    resume = len(sys.argv) > 4 and sys.argv[4] == "resume"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(1)
    if world > 1:
        from posttrain.parallel.mesh import init_group

        init_group(60.0)
        if int(os.environ["RANK"]) > 0:
            import posttrain.parallel.dcp  # noqa: F401
            import posttrain.train.sharded.session  # noqa: F401
            import posttrain.train.sharded.sync  # noqa: F401
            from posttrain.parallel.group import follow_and_exit

            follow_and_exit(int(os.environ["RANK"]), world, 60.0)
    from posttrain.config import SFTConfig, load_config
    from posttrain.models.tiny import build_tiny
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.rl import build_state, train_rl
    from posttrain.train.sft import sft_train

    extra = os.environ.get("POSTTRAIN_TEST_OVERRIDES", "").split(";")  # e.g. cluster.address=... (Ray workers)
    cfg = load_config(None, overrides(steps) + [x for x in extra if x])
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = [dataclasses.replace(t, verifier=Spec("sharded_test_digit_match")) for t in make_splits(cfg).train]
    sft_train(model, tok, [(t.prompt, t.oracle) for t in train], SFTConfig(steps=30, batch_size=12, lr=1e-2))
    run_dir.mkdir(parents=True, exist_ok=True)
    from posttrain.recipes.cluster import cluster_engine_factory  # None -> the local engine

    st = build_state(cfg, run_dir, model, tok, train, train[:2], None, resume=resume,
                     engine_factory=cluster_engine_factory(cfg))
    asyncio.run(train_rl(st))
    rows = st.metrics.read()
    st.metrics.close(), st.store.close()
    final = st.trainer.export_model()
    result = {"rows": rows, "state": {k: v.detach().clone() for k, v in final.state_dict().items()}}
    if cfg.cluster.address:  # what the Ray workers generate now against the final weights, run locally
        from posttrain.rollout.engine import GenRequest, SamplingParams
        from posttrain.rollout.engines.fast.engine import FastEngine

        req = [GenRequest((1, 5, 9, 2, 7), SamplingParams(temperature=0.0, max_new_tokens=6))] * 2
        result["remote"] = [o.token_ids for o in st.engine.generate(req)]
        result["local"] = FastEngine(final.eval(), tok).generate(req[:1])[0].token_ids
        result["versions"] = [w.version for w in st.engine.workers]
        st.engine.close()
    torch.save(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
