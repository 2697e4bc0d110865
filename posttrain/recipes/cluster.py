"""Where a run's rollouts and sandboxes live: this process, or a Ray cluster (`cluster.address`).

    engine_factory = cluster_engine_factory(cfg)   # None -> train.rl's local engine
    sandbox = run_sandbox(cfg)

The only place outside distributed/ that decides to use Ray, so train/ sees nothing but
the Engine and Sandbox protocols.
"""

from __future__ import annotations

from typing import Any, Callable


def cluster_engine_factory(cfg: Any) -> Callable[[Any, Any, Any], Any] | None:
    """A factory of Ray rollout workers behind the Engine protocol, or None for a local run."""
    if not cfg.cluster.address:
        return None
    from posttrain.distributed import build_remote_engine

    return build_remote_engine


def run_sandbox(cfg: Any, sandbox: Any = None) -> Any:
    """`sandbox` if given, else one pool per Ray node (cluster runs), else a local pool of
    sandbox.concurrency slots (0: the process-wide pool, one slot per core)."""
    if sandbox is not None:
        return sandbox
    if cfg.cluster.address:
        from posttrain.distributed import remote_sandbox

        return remote_sandbox(cfg)
    from posttrain.sandbox import default_sandbox
    from posttrain.sandbox.pool import SandboxPool

    return SandboxPool(concurrency=cfg.sandbox.concurrency) if cfg.sandbox.concurrency else default_sandbox()
