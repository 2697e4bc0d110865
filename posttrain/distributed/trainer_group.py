"""`trainer.launcher=ray`: the sharded trainer's ranks 1..N-1 as Ray actors on the cluster.

    posttrain sft cfg.yaml trainer.world_size=4 trainer.launcher=ray cluster.address=HEAD:6379

The command's own process is rank 0: it runs the recipe (scheduler, rollout, eval, the run
directory) as under torchrun. `launch_ray_group` (called by the CLI before anything else,
launch.maybe_spawn) connects to `cluster.address`, starts one `RankActor` per other rank
(SPREAD, `trainer.rank_cpus` CPUs and `trainer.rank_gpus` GPUs each), sets rank 0's
torch.distributed environment (MASTER_ADDR = this node's address), and each actor joins
the process group and follows rank 0's commands (group.follow) until the job ends. From
there the job is the same as one `launch.run_ranks` starts: the same handlers, heartbeats
and collective timeouts, so a rank whose actor or node dies is named in one line within
`trainer.timeout_s`, and the actors go with the driver (Ray kills an owner's actors).

Limits: rank 0 must be reachable from every node at this node's Ray address (the TCP
store and gloo/NCCL connect to it).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping


_GROUP: list[Any] = []  # the actors and their `follow` refs: alive as long as this process


class RankActor:
    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def follow(self, rank: int, world: int, addr: str, port: int, timeout_s: float, threads: int) -> int:
        """Join the job's process group as `rank` and run rank 0's commands until "stop"."""
        import torch

        os.environ.update({"RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": "1",
                           "MASTER_ADDR": addr, "MASTER_PORT": str(port), "POSTTRAIN_TIMEOUT_S": str(timeout_s)})
        torch.set_num_threads(threads)
        import posttrain.parallel.dcp  # noqa: F401  (the handlers every rank runs)
        import posttrain.train.sharded.session  # noqa: F401
        import posttrain.train.sharded.steps  # noqa: F401
        import posttrain.train.sharded.sync  # noqa: F401
        from posttrain.parallel.group import follow
        from posttrain.parallel.mesh import init_group

        init_group(timeout_s)
        return follow(rank, world, timeout_s)


def launch_ray_group(argv: Any, world: int, timeout_s: float, settings: Mapping[str, str]) -> list[str]:
    """Start ranks 1..world-1 as actors and make this process rank 0; returns their node labels.
    `settings`: the command line's `cluster.address`, `trainer.rank_cpus`, `trainer.rank_gpus`."""
    import ray

    from posttrain.distributed.collective import free_port
    from posttrain.distributed.faults import ClusterError
    from posttrain.distributed.placement import alive_nodes, connect, node_label
    from posttrain.errors import ConfigError

    address = settings.get("cluster.address")
    try:
        rank_cpus, rank_gpus = float(settings.get("trainer.rank_cpus", 1)), float(settings.get("trainer.rank_gpus", 0))
    except ValueError:
        raise ConfigError(f"trainer.rank_cpus={settings.get('trainer.rank_cpus')!r} / trainer.rank_gpus="
                          f"{settings.get('trainer.rank_gpus')!r}: must be numbers") from None
    if not address:
        raise ConfigError("trainer.launcher=ray needs cluster.address (the Ray head, e.g. HEAD:6379 or auto)")
    connect(address)
    addr = ray.util.get_node_ip_address()
    port = free_port(addr)
    cls = ray.remote(num_cpus=rank_cpus, num_gpus=rank_gpus, max_restarts=0)(RankActor)
    actors = [cls.options(scheduling_strategy="SPREAD").remote() for _ in range(world - 1)]
    labels = {n["NodeID"]: node_label(n) for n in alive_nodes()}
    try:
        nodes = [labels.get(n, n[:8]) for n in ray.get([a.node.remote() for a in actors], timeout=timeout_s)]
    except Exception as e:  # noqa: BLE001 - no room on the cluster, or an actor died starting
        for a in actors:
            ray.kill(a, no_restart=True)
        raise ClusterError(f"trainer.launcher=ray: {world - 1} rank actor(s) of {rank_cpus:g} CPU / {rank_gpus:g} "
                           f"GPU did not start within trainer.timeout_s={timeout_s:g}: {type(e).__name__}") from None
    threads = max(1, int(rank_cpus))
    refs = [a.follow.remote(r + 1, world, addr, port, timeout_s, threads) for r, a in enumerate(actors)]
    _GROUP.extend([*actors, *refs])
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": addr, "MASTER_PORT": str(port), "POSTTRAIN_TIMEOUT_S": str(timeout_s)})
    print(f"posttrain: trainer ranks 1..{world - 1} of {world} started as Ray actors on "
          f"{', '.join(nodes)}; this process is rank 0 ({addr}:{port})", file=sys.stderr, flush=True)
    return nodes
