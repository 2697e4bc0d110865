"""How Ray failures map onto posttrain's: which errors mean "this node/actor is gone".

A dead actor, a dead node or an unreachable actor means the work can run elsewhere:
the caller marks that pool or worker dead and resubmits. A `RayTaskError` wraps an
exception our own code raised remotely; `unwrap` returns the original so a bad
request (`SandboxError`) reaches the caller as itself, not as a Ray traceback.
"""

from __future__ import annotations

from posttrain.errors import PosttrainError


class ClusterError(PosttrainError):
    """The cluster cannot do the work: no capacity left, or it could not be reached."""


class RemoteTimeout(ClusterError):
    """A remote call did not answer in time; the message names the node."""


def is_lost(e: BaseException) -> bool:
    """True when `e` says the actor or its node is gone (the work may be resubmitted)."""
    import ray.exceptions as rx

    lost = (rx.RayActorError, rx.NodeDiedError, rx.ObjectLostError, rx.OwnerDiedError, rx.WorkerCrashedError)
    lost += tuple(getattr(rx, n) for n in ("ActorUnavailableError", "ActorDiedError") if hasattr(rx, n))
    return isinstance(e, lost)


def unwrap(e: BaseException) -> BaseException:
    """The exception our code raised inside the actor, if `e` is Ray's wrapper around one."""
    import ray.exceptions as rx

    if isinstance(e, rx.RayTaskError) and getattr(e, "cause", None) is not None:
        return e.cause
    return e
