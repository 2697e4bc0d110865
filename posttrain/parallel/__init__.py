"""Sharded training on torch.distributed: FSDP2 (`fully_shard`) over a dp mesh, DTensor tensor
parallelism (`parallelize_module`) as a second mesh dimension, DCP checkpoints, and the rank
group that runs one collective command per step. Nothing here shards by hand, and nothing
here knows about tasks, sandboxes, rollouts or Ray: the training steps, rank 0's loops and the
bucketed sync into an engine are `train/sharded/`'s. docs/scaling.md ("Sharded training") has
the model of its memory and communication and the plan for 7B / 70B / 235B MoE.

    mesh.py        process group (with a timeout) and the (dp[, tp]) device mesh
    plan.py        the TP plan of a Llama-style decoder, with its divisibility checks
    wrap.py        TP + activation checkpointing + fully_shard with a MixedPrecisionPolicy
    group.py       rank 0 drives, the other ranks follow: one collective call per training step
    dcp.py         torch.distributed.checkpoint save / resume at any world size / HF export
    accounting.py  per-rank parameter, gradient, optimiser, activation and communication bytes
    launch.py      `trainer.world_size=N`: spawn N ranks, fail fast with the rank named
    rank_parent.py a rank ends with its launcher (the parent-death signal)

Imports from posttrain: only `errors` and `registry` (layering: tests/unit/core/test_layering.py).
"""
