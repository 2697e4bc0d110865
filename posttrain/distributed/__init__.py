"""Scale-out on Ray: sandbox pools per node and rollout workers, behind the same protocols.

    from posttrain.distributed import remote_sandbox, build_remote_engine
    sandbox = remote_sandbox(cfg)                 # Sandbox protocol: RaySandbox (dispatcher.py)
    engine = build_remote_engine(cfg, model, tok)  # Engine protocol: RemoteEngine (remote_engine.py)

This package is the only place in posttrain that imports Ray, and this file imports
nothing of it: Ray is imported (and the driver connected) only when one of these
functions is called, which the RL loop does only when `cluster.address` is set.

Modules: routing.py (global admission, least-loaded choice; no Ray), pool_actor.py (one
SandboxPool per node), dispatcher.py (RaySandbox), rollout_worker.py and
remote_engine.py (versioned weight sync, staleness, resubmission), placement.py
(connect, one pool per node, SPREAD workers), faults.py (which Ray errors mean
"node gone"), localcluster.py (a loopback two-node cluster for tests and benchmarks).
See docs/distributed.md and docs/scaling.md.
"""

from __future__ import annotations

from typing import Any


def enabled(cfg: Any) -> bool:
    return bool(getattr(getattr(cfg, "cluster", None), "address", None))


def remote_sandbox(cfg: Any) -> Any:
    """A `RaySandbox` with one pool actor per alive node of the cluster at cfg.cluster.address."""
    from posttrain.distributed.dispatcher import RaySandbox
    from posttrain.distributed.placement import connect

    connect(cfg.cluster.address)
    return RaySandbox.create(cfg.cluster)


def build_remote_engine(cfg: Any, model: Any, tok: Any) -> Any:
    """A `RemoteEngine` over cfg.cluster.rollout_workers actors holding cfg.engine.name engines."""
    from posttrain.distributed.placement import connect, start_workers
    from posttrain.distributed.remote_engine import RemoteEngine
    from posttrain.errors import ConfigError

    c = cfg.cluster
    # cluster.weight_sync is a Literal of the schema (object_store | collective); what it needs is checked here
    if c.weight_sync == "collective" and c.staleness != 0:
        raise ConfigError("cluster.weight_sync=collective needs cluster.staleness=0 (a broadcast reaches every "
                          f"worker at once), got cluster.staleness={c.staleness}")
    connect(c.address)
    workers = start_workers(c, model, tok, cfg.engine.name, dict(cfg.engine.args))
    collective = None
    if c.weight_sync == "collective":
        from posttrain.distributed.collective import Broadcaster

        collective = Broadcaster.create([h for _, h in workers], c.collective_backend, c.call_timeout_s)
    return RemoteEngine(workers, c.staleness, c.generate_timeout_s, cfg.engine.args.get("dtype"), c.max_resubmits,
                        collective)
