"""A 2-rank job that idles between commands, run as each rank by test_job_control.py (launch.run_ranks).

    python rank_idle.py DIR   # every rank writes DIR/ready<rank>; rank 0 then waits for DIR/go (no
                              # collective in flight: the followers poll the store, as while rank 0
                              # generates), sends one all-reduce command and stops the job

Exits 0 when the command's all-reduce summed one from every rank.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from posttrain.parallel import group
from posttrain.parallel.mesh import init_group


@group.handler("ping")
def _ping(ctx, payload):  # a collective after the pause: every rank must still be in the group
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    return int(t.item())


def main() -> int:
    d, timeout_s = Path(sys.argv[1]), float(os.environ["POSTTRAIN_TIMEOUT_S"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init_group(timeout_s)
    if rank > 0:
        (d / f"ready{rank}").touch()
        group.follow_and_exit(rank, world, timeout_s)
    driver = group.current_driver(timeout_s)
    (d / "ready0").touch()
    while not (d / "go").exists():
        time.sleep(0.05)
    summed = driver.call("ping")
    group.close_driver()
    return 0 if summed == world else 3


if __name__ == "__main__":
    sys.exit(main())
