"""Isolated, observable, reproducible execution of untrusted code, without Docker.

See docs/sandbox.md for the threat model. Entry points: `SandboxPool`, `default_sandbox`.
"""

from posttrain.sandbox.pool import SandboxPool, default_sandbox
from posttrain.sandbox.protocol import Sandbox, Session

__all__ = ["Sandbox", "SandboxPool", "Session", "default_sandbox"]
