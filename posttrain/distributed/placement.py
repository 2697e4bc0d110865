"""Connect to the cluster and place the actors: one sandbox pool per node, rollout workers spread.

    connect("auto")                       # or "127.0.0.1:6379", "ray://head:10001"
    slots = start_pools(cfg.cluster)      # Slot per alive node, started (jittered) and checked
    workers = start_workers(cfg.cluster, model, tok, engine_args)

Sandbox pools are pinned one per node with a hard node-affinity strategy (Ray's plain
SPREAD is best effort and may stack two on one node); each is sized to the CPUs that node
declares. Rollout workers use SPREAD, optionally restricted to nodes carrying the custom
resource `rollout_resource`. A pool that fails to start within `call_timeout_s` is left
out with a warning naming its node; none at all is a `ClusterError`.
"""

from __future__ import annotations

import logging
from typing import Any

from posttrain.distributed.faults import ClusterError
from posttrain.distributed.routing import Slot

log = logging.getLogger(__name__)


def connect(address: str) -> None:
    """ray.init once per process; a loopback head keeps this driver on 127.0.0.1 too."""
    import ray

    if ray.is_initialized():
        return
    kw: dict[str, Any] = {"address": address, "log_to_driver": False, "configure_logging": False}
    if address.startswith("127.0.0.1") or address.startswith("localhost"):
        # Ray rewrites a loopback address into the machine's routable one; a loopback
        # cluster (localcluster.py) listens on 127.0.0.1 only, so keep it as given.
        import ray._private.services as services

        services.resolve_ip_for_localhost = lambda host: host
        kw["_node_ip_address"] = "127.0.0.1"
    try:
        ray.init(**kw)
    except Exception as e:  # noqa: BLE001 - any failure to reach the head is the user's address
        raise ClusterError(f"cannot connect to the Ray cluster at cluster.address={address!r}: "
                           f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from None


def alive_nodes() -> list[dict]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def node_label(node: dict) -> str:
    """A stable, readable node name: its custom resource (pt_node_b) if it has one, else ip:id."""
    custom = sorted(k for k in node.get("Resources", {}) if k.startswith("pt_node"))
    return custom[0] if custom else f"{node['NodeManagerAddress']}:{node['NodeID'][:8]}"


def start_pools(ccfg: Any, nodes: list[dict] | None = None) -> list[Slot]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from posttrain.distributed.pool_actor import SandboxPoolActor

    nodes = alive_nodes() if nodes is None else nodes
    if ccfg.sandbox_resource:
        nodes = [n for n in nodes if n.get("Resources", {}).get(ccfg.sandbox_resource)]
    remote = ray.remote(num_cpus=0, max_concurrency=ccfg.actor_concurrency, max_restarts=0)(SandboxPoolActor)
    slots, refs = [], []
    for n in nodes:
        cores = ccfg.pool_concurrency or max(1, int(n.get("Resources", {}).get("CPU", 1)))
        h = remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                           name=None).remote(cores, ccfg.start_jitter_s, ccfg.warm_slots)
        slots.append(Slot(node_label(n), cores, h, ahead=cores * ccfg.queue_per_slot))
        refs.append(h.start.remote())
    ok = []
    for slot, ref in zip(slots, refs):
        try:
            info = ray.get(ref, timeout=ccfg.call_timeout_s + ccfg.start_jitter_s)
            log.info("sandbox pool on %s: %s", slot.name, info)
            ok.append(slot)
        except Exception as e:  # noqa: BLE001 - one bad node must not stop the others
            log.warning("sandbox pool on node %s did not start: %s", slot.name, str(e).splitlines()[0][:200])
            ray.kill(slot.handle, no_restart=True)
    if not ok:
        raise ClusterError(f"no sandbox pool started on any of {len(nodes)} node(s)"
                           + (f" with resource {ccfg.sandbox_resource!r}" if ccfg.sandbox_resource else ""))
    return ok


def start_workers(ccfg: Any, model: Any, tok: Any, engine_name: str, engine_args: dict) -> list[tuple[str, Any]]:
    """`ccfg.rollout_workers` engine actors, SPREAD; returns (label, handle) of those that started."""
    import ray

    from posttrain.distributed.rollout_worker import CONCURRENCY_GROUPS, RolloutWorker

    opts: dict[str, Any] = {"num_cpus": ccfg.worker_cpus, "scheduling_strategy": "SPREAD", "max_restarts": 0}
    if ccfg.rollout_resource:
        opts["resources"] = {ccfg.rollout_resource: 0.001}
    payload = ray.put((model, tok))
    cls = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(RolloutWorker)  # offer_weights beside generate
    hs = [cls.options(**opts).remote(payload, engine_name, engine_args, max(1, int(ccfg.worker_cpus)))
          for _ in range(ccfg.rollout_workers)]
    labels = {n["NodeID"]: node_label(n) for n in alive_nodes()}
    out = []
    for i, h in enumerate(hs):
        try:
            info = ray.get(h.info.remote(), timeout=ccfg.generate_timeout_s)  # first call waits for torch import
            out.append((f"{labels.get(info['node_id'], info['node_id'][:8])}/w{i}", h))
        except Exception as e:  # noqa: BLE001
            log.warning("rollout worker did not start: %s", str(e).splitlines()[0][:200])
            ray.kill(h, no_restart=True)
    if not out:
        raise ClusterError(f"none of {ccfg.rollout_workers} rollout worker(s) started")
    return out

