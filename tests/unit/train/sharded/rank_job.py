"""One sharded job on the tiny model, run as each rank by the tests (launch.run_ranks).

    python rank_job.py OUT.pt KIND [tp] [steps] [ac] [bf16]   KIND: sft | sft+dpo | die | hang

Rank 0 trains with the sharded loops and writes {"sft": {"rows", "state"}, and for sft+dpo
"dpo" and "sync" (a bucketed push into a fast engine), with bf16 "bf16" (one step's rows)}
to OUT.pt; the other ranks follow. The one-process reference runs in the test itself with the same seed.
"""

from __future__ import annotations

from posttrain.builtins import load_builtins

load_builtins()  # a rank is its own interpreter: what the CLI and the suite do first

import os
import sys

import torch


def tiny(layers: int = 2) -> tuple:
    from posttrain.config import TinyModelConfig
    from posttrain.models.tiny import build_tiny

    return build_tiny(TinyModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2), seed=0)


def sft_items(n: int = 24) -> list:
    import random

    rng = random.Random(1)
    items = []
    for _ in range(n):
        k, a = rng.randrange(3, 9), rng.randrange(2, 9)
        ids = [rng.randrange(11, 100) for _ in range(k + a)]
        items.append((ids, [0] * k + [1] * a))
    return items


def dpo_pairs(n: int = 12) -> list:
    import random

    from posttrain.train.pairs import Pair

    rng = random.Random(2)
    rand = lambda k: tuple(rng.randrange(11, 100) for _ in range(k))  # noqa: E731
    return [Pair(rand(rng.randrange(3, 7)), rand(rng.randrange(2, 6)) + (3,), rand(rng.randrange(2, 6)) + (3,), f"p{i}")
            for i in range(n)]


def main() -> int:
    out, kind = sys.argv[1], sys.argv[2]
    tp = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    from posttrain.parallel.mesh import init_group

    init_group(float(os.environ.get("POSTTRAIN_TIMEOUT_S", "60")))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank > 0:
        import posttrain.train.sharded.session  # noqa: F401
        from posttrain.parallel.group import follow_and_exit

        if kind in ("die", "hang") and rank == 1:  # mid-training: killed, or frozen (no exit, no heartbeat)
            import signal

            import posttrain.train.sharded.steps  # noqa: F401  (registers "supervised_step")
            from posttrain.parallel.group import HANDLERS

            # As its third step starts (two done, rank 0 inside the step's collectives): on progress, not
            # on a clock, so a loaded machine cannot move the fault before training or after its end.
            step, calls = HANDLERS["supervised_step"], []

            def faulty_step(ctx, payload):
                calls.append(1)
                if len(calls) == 3:
                    os.kill(os.getpid(), signal.SIGKILL if kind == "die" else signal.SIGSTOP)
                return step(ctx, payload)

            HANDLERS["supervised_step"] = faulty_step
        follow_and_exit(rank, world, float(os.environ.get("POSTTRAIN_TIMEOUT_S", "60")))

    from posttrain.config import OptimConfig, SFTConfig, TrainerConfig
    from posttrain.train.sharded.loops import train_dpo_sharded, train_encoded_sharded
    from posttrain.train.sharded.session import ShardedSession

    model, tok = tiny()
    tcfg = TrainerConfig(tp=tp, mixed_precision="fp32", timeout_s=float(os.environ.get("POSTTRAIN_TIMEOUT_S", "60")),
                         gradient_checkpointing="ac" in sys.argv[5:])
    result = {}
    if "dpo" in kind:  # a fresh model on the same session machinery: DPO first, then SFT
        from posttrain.train.dpo import reference_logprobs

        pairs = dpo_pairs()
        ref = reference_logprobs(model, pairs, tok.pad_token_id, 64)
        sh = ShardedSession.start(model, tcfg, OptimConfig(lr=1e-3, weight_decay=0.01), tok.pad_token_id)
        hist = train_dpo_sharded(sh, pairs, ref, dpo_cfg(steps), tcfg)
        result["dpo"] = {"rows": hist, "state": sh.export_model().state_dict()}
        model, tok = tiny()
    cfg = SFTConfig(steps=steps if kind not in ("die", "hang") else 10_000, batch_size=8, lr=3e-3, max_len=64)
    sh = ShardedSession.start(model, tcfg, cfg.optim, tok.pad_token_id)
    hist = train_encoded_sharded(sh, sft_items(), cfg, tcfg)
    result["sft"] = {"rows": hist, "state": sh.export_model().state_dict()}
    if "dpo" in kind:  # bucketed sync into a fresh fast engine (built from the untrained model)
        from posttrain.rollout import make_engine
        from posttrain.train.sharded.sync import push_buckets

        engine = make_engine("fast", tiny()[0], tok)
        stats = push_buckets(sh, engine, 1, bucket_bytes=16 << 10)
        result["sync"] = {"stats": stats, "version": engine.weights_version,
                          "views": {k: v.detach().clone() for k, v in engine._views.items()}}
    if "bf16" in sys.argv[5:]:  # FSDP2's bf16-params / fp32-reduce policy, on gloo: one step from the same start
        model, tok = tiny()
        sh = ShardedSession.start(model, TrainerConfig(tp=tp, mixed_precision="bf16", timeout_s=tcfg.timeout_s),
                                  cfg.optim, tok.pad_token_id)
        result["bf16"] = train_encoded_sharded(sh, sft_items(), SFTConfig(steps=1, batch_size=8, lr=3e-3, max_len=64),
                                               tcfg)
    torch.save(result, out)
    sh.close()
    return 0


def dpo_cfg(steps: int):
    from posttrain.config import DPOConfig

    return DPOConfig(steps=steps, batch_size=6, lr=1e-3, max_len=64)


if __name__ == "__main__":
    from posttrain.errors import PosttrainError

    try:
        sys.exit(main())
    except PosttrainError as e:  # as the CLI prints it: one line
        print(f"posttrain: error: {e}", file=sys.stderr)
        sys.exit(2)
