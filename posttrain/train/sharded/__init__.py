"""Sharded training on torch.distributed: FSDP2 (`fully_shard`) over a dp mesh, DTensor tensor
parallelism (`parallelize_module`) as a second mesh dimension, DCP checkpoints, bucketed
weight sync. Nothing here shards by hand; docs/scaling.md ("Sharded training") has the
model of its memory and communication and the plan for 7B / 70B / 235B MoE.

    mesh.py        process group (with a timeout) and the (dp[, tp]) device mesh
    plan.py        the TP plan of a Llama-style decoder, with its divisibility checks
    wrap.py        TP + activation checkpointing + fully_shard with a MixedPrecisionPolicy
    group.py       rank 0 drives, the other ranks follow: one collective call per training step
    steps.py       the per-rank SFT / DPO / RL steps, each weighted so dp ranks sum to the global loss
    loops.py       rank 0's SFT and DPO loops (same batches, same order as the one-process loops)
    dcp.py         torch.distributed.checkpoint save / resume at any world size / HF export
    sync.py        full weights to an engine in bounded buckets, verified on arrival
    accounting.py  per-rank parameter, gradient, optimiser, activation and communication bytes
    launch.py      `trainer.world_size=N`: spawn N ranks, fail fast with the rank named

Only rank 0 imports this package's users (recipes, rl.py); followers run `group.follow()`.
"""
