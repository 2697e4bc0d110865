"""A plugin for benchmarks/longtail_loop.py: arithmetic whose checks run on a remote service.

    plugins: [benchmarks/plugins/remote_checks.py]
    tasks: {domains: {arith_remote: {args: {short_s: 0.25, slow_s: 2.5, slow_share: 0.25}}}}
    tasks: {domains: {arith_remote: {weight: 3, args: {slow_share: 0}}, arith_remote_slow: {weight: 1}}}

Production RL verifies on machines other than the trainer's (a sandbox fleet, a judge model
on its own GPU), so a check costs the trainer wall time, not its cores, and some checks take
ten times the others (a test suite, an agent episode). This domain is the `arithmetic`
generator's tasks, each checked by the real `exact_numeric` verifier after waiting for the
service: `short_s` for most tasks, `slow_s` for a seeded `slow_share` of them (chosen by task
id, so the same tasks are slow in every arm). The waiting is asyncio.sleep: it stands for the
round trip and uses no CPU, as a remote check would not; the score is the real check's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib

from posttrain.registry import domain, verifier
from posttrain.tasks.arithmetic import Arithmetic
from posttrain.types import Spec, Task, Trajectory, VerifyResult
from posttrain.verifiers.base import VerifyContext
from posttrain.verifiers.numeric import ExactNumeric


def is_slow(task_id: str, share: float) -> bool:
    return zlib.crc32(task_id.encode()) % 1000 < share * 1000


@domain("arith_remote")
class ArithRemote(Arithmetic):
    name = "arith_remote"

    def __init__(self, max_new_tokens: int = 8, short_s: float = 0.25, slow_s: float = 2.5,
                 slow_share: float = 0.25) -> None:
        super().__init__(max_new_tokens)
        if not (0 <= short_s <= slow_s and 0 <= slow_share <= 1):
            raise ValueError(f"arith_remote: need 0 <= short_s <= slow_s and 0 <= slow_share <= 1, got "
                             f"{short_s}, {slow_s}, {slow_share}")
        self.short_s, self.slow_s, self.slow_share = short_s, slow_s, slow_share

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        out = []
        for t in super().generate(n, seed, difficulty):
            tid = f"{self.name}-{t.id}"  # two of these domains in one run draw apart
            wait = self.slow_s if is_slow(tid, self.slow_share) else self.short_s
            out.append(dataclasses.replace(t, id=tid, domain=self.name, metadata={**t.metadata, "remote_s": wait},
                                           verifier=Spec("remote_numeric", {**t.verifier.args, "wait_s": wait})))
        return out


@domain("arith_remote_slow")
class ArithRemoteSlow(ArithRemote):
    """The same tasks, every check slow by default: slow tasks as a domain of their own, which the
    long-tail queue can predict from the domain's history (an agent or terminal domain beside
    one-step ones), where a slow share inside `arith_remote` looks like the rest until it runs."""

    name = "arith_remote_slow"

    def __init__(self, max_new_tokens: int = 8, short_s: float = 0.25, slow_s: float = 2.5,
                 slow_share: float = 1.0) -> None:
        super().__init__(max_new_tokens, short_s, slow_s, slow_share)


@verifier("remote_numeric", answer_format="line")
class RemoteNumeric(ExactNumeric):
    """`exact_numeric` after `wait_s` seconds of a remote round trip."""

    def __init__(self, answer: float, wait_s: float = 0.0, rel_tol: float = 0.0, abs_tol: float = 1e-9) -> None:
        super().__init__(answer, rel_tol, abs_tol)
        self.wait_s = wait_s

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        await asyncio.sleep(self.wait_s)
        return await super().__call__(task, trajectory, ctx)
