"""`python -m posttrain ...` (and `torchrun --nproc-per-node N -m posttrain ...`).

Under a multi-process launch (WORLD_SIZE > 1) every rank joins the process group first,
with a timeout on every collective (POSTTRAIN_TIMEOUT_S, set by `trainer.world_size=N`;
300 s under a bare torchrun). Rank 0 then runs the command as usual; the other ranks only
take part in the training steps (posttrain/parallel/group.py) and write nothing.
"""

import os
import sys


def _run() -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from posttrain.parallel.mesh import init_group

        timeout_s = float(os.environ.get("POSTTRAIN_TIMEOUT_S", "300"))
        init_group(timeout_s)
        rank = int(os.environ["RANK"])
        if rank > 0:
            import posttrain.train.sharded.session  # noqa: F401  (registers the setup/state handlers)
            import posttrain.train.sharded.steps  # noqa: F401
            import posttrain.parallel.dcp  # noqa: F401
            import posttrain.train.sharded.sync  # noqa: F401
            from posttrain.parallel.group import follow_and_exit

            follow_and_exit(rank, int(os.environ["WORLD_SIZE"]), timeout_s)
        import atexit

        from posttrain.parallel.group import release_followers

        atexit.register(release_followers, timeout_s)
    from posttrain.cli.main import main

    main()


_run()
