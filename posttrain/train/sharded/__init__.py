"""The training side of sharded runs, over the machinery of `posttrain/parallel/` (meshes,
FSDP2/TP wrapping, the rank group, DCP, the launcher): what each rank computes per step and
what rank 0 drives. docs/scaling.md ("Sharded training") has the model of its memory and
communication.

    session.py     rank 0's handle (`ShardedSession`): builds the sharded model on every rank
    steps.py       the per-rank supervised and RL steps, each weighted so dp ranks sum to the global loss
    supervised.py  the supervised `SupervisedTrainer` over the ranks (the one loop is train/supervised.py)
    loops.py       SFT and DPO on a session the caller started (that loop with that trainer)
    trainer.py     the RL `Trainer` over the ranks: start, update at rank 0's lr, weight sync, checkpoints
    checkpoint.py  both trainers' checkpoints: DCP shards beside step-N/, resumable at any world size
    rng.py         each rank's RNG states in those checkpoints (rank 0's stay in trainer_state.pt)
    sync.py        full weights to an engine in bounded buckets, verified on arrival

Only rank 0 imports this package's users (recipes, train/trainer.py); followers import session.py (which
registers every handler) and run `parallel.group.follow()`.
"""
