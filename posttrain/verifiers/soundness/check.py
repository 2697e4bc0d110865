"""Soundness check of a domain: oracle scores 1.0, empty scores 0, a wrong answer < 1.

    report = await check_domain("math", n=200, repeats=5)
    report.as_json()  # {"domain", "n", "oracle_pass_rate", "empty_pass_rate", "wrong_pass_rate", "flake_rate", ...}

Every task is scored `repeats` times per mode (oracle, empty, wrong), each time from a
fresh replay (a fresh sandbox session for shell tasks). A "pass" is a full score of 1.0.
A (task, mode) pair is flaky when its repeats disagree on the score. Infrastructure
errors are counted apart (`infra_error_rate`) and make the domain unsound, never a 0.

`check_file_with_probes` does the same for the tasks of a task file (JSONL/YAML), one
report per domain the file holds: a registered domain supplies its own wrong answer, any
other gets a generic one (`GenericWrong`); tasks without an oracle are named and skipped
by the oracle check (they cannot show that an honest answer scores 1).

`check_domain_with_probes` adds the hack probes (`hack_probes.py`, run by
`probe_check.py` through the RL scoring path) on the first `probe_n` tasks, with the same
repeats and one shared sandbox pool: a domain is sound only if both halves are.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from posttrain.registry import build
from posttrain.types import Task, VerifyResult
from posttrain.verifiers.base import VerifyContext

MODES = ("oracle", "empty", "wrong")


@dataclass
class CheckReport:
    domain: str
    n: int
    oracle_pass_rate: float
    empty_pass_rate: float
    wrong_pass_rate: float
    flake_rate: float
    empty_zero_rate: float = 1.0  # share of empty runs scoring exactly 0
    wrong_mean_score: float = 0.0
    infra_error_rate: float = 0.0
    repeats: int = 1
    failures: list[str] = field(default_factory=list)  # first few problems, for humans

    @property
    def sound(self) -> bool:
        return (self.oracle_pass_rate == 1.0 and self.empty_zero_rate == 1.0 and self.wrong_pass_rate == 0.0
                and self.flake_rate == 0.0 and self.infra_error_rate == 0.0)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "sound": self.sound}


def _needs_sandbox(task: Task) -> bool:
    return "shell" in task.environment.tools or bool(task.metadata.get("needs_sandbox"))


async def score_once(task: Task, text: str, sandbox: Any) -> VerifyResult:
    """Replay `text` on `task` (in a fresh session for shell tasks) and verify it."""
    from posttrain.tasks.plan import replay
    from posttrain.verifiers.compose import build_verifier

    v = build_verifier(task.verifier)
    try:
        if "shell" in task.environment.tools:
            if sandbox is None:
                return VerifyResult.infra("shell task needs a sandbox")
            from posttrain.tasks.terminal import open_task_session

            async with open_task_session(sandbox, task) as session:
                traj = await replay(task, text, session)
                return await v(task, traj, VerifyContext(sandbox=sandbox, session=session))
        traj = await replay(task, text)
        from posttrain.verifiers.run import VerifierRunner  # the RL path: domain format rule, then the verifier

        return (await VerifierRunner(sandbox).verify_one(task, traj)).verify
    except Exception as e:  # noqa: BLE001  a crash in the checker is an infra error, recorded, not a 0
        return VerifyResult.infra(f"{type(e).__name__}: {e}")


async def check_tasks(domain_name: str, dom: Any, tasks: list[Task], repeats: int = 5, sandbox: Any = None,
                      concurrency: int = 4, seed: int = 0) -> CheckReport:
    sem = asyncio.Semaphore(concurrency)

    async def run(task: Task, text: str) -> list[VerifyResult]:
        async with sem:
            return [await score_once(task, text, sandbox) for _ in range(repeats)]

    texts = []
    for t in tasks:
        wrong = dom.wrong_answer(t, random.Random(f"{seed}:{t.id}"))
        texts.append({"oracle": t.oracle or "", "empty": "", "wrong": wrong})
    jobs = [run(t, texts[i][m]) for i, t in enumerate(tasks) for m in MODES]
    results = await asyncio.gather(*jobs)
    return summarise(domain_name, tasks, results, repeats)


def summarise(domain_name: str, tasks: list[Task], results: list[list[VerifyResult]], repeats: int) -> CheckReport:
    by_mode: dict[str, list[list[VerifyResult]]] = {m: results[i :: len(MODES)] for i, m in enumerate(MODES)}
    runs = max(1, len(tasks) * repeats)
    flat = [r for rs in results for r in rs]
    flaky = sum(1 for rs in results if len({round(r.score, 9) for r in rs}) > 1 or len({r.status for r in rs}) > 1)
    full = {m: sum(r.score >= 1.0 - 1e-9 and r.status == "ok" for rs in by_mode[m] for r in rs) / runs for m in MODES}
    failures = []
    for t, o, e, w in zip(tasks, by_mode["oracle"], by_mode["empty"], by_mode["wrong"]):
        for mode, rs, bad in (("oracle", o, lambda r: r.score < 1.0), ("empty", e, lambda r: r.score > 0.0),
                              ("wrong", w, lambda r: r.score >= 1.0)):
            r = next((r for r in rs if bad(r) or r.status != "ok"), None)
            if r is not None and len(failures) < 5:
                failures.append(f"{t.id} {mode}: score {r.score:.3f} {r.status} {r.reason}")
    return CheckReport(
        domain=domain_name, n=len(tasks),
        oracle_pass_rate=full["oracle"], empty_pass_rate=full["empty"], wrong_pass_rate=full["wrong"],
        flake_rate=flaky / max(1, len(results)),
        empty_zero_rate=sum(r.score == 0.0 and r.status == "ok" for rs in by_mode["empty"] for r in rs) / runs,
        wrong_mean_score=sum(r.score for rs in by_mode["wrong"] for r in rs) / runs,
        infra_error_rate=sum(r.status == "infra_error" for r in flat) / max(1, len(flat)),
        repeats=repeats, failures=failures,
    )


async def check_domain(name: str, n: int = 200, repeats: int = 5, seed: int = 0, difficulty: float = 1.0,
                       sandbox: Any = None, concurrency: int = 4) -> CheckReport:
    """Generate `n` tasks of domain `name` and check them (see module doc).

    Without `sandbox`, a private `SandboxPool` serves this call (it makes no processes
    until a task needs one).
    """
    dom = build(name, kind="domain")
    tasks = dom.generate(n, seed, difficulty)
    if sandbox is not None:
        return await check_tasks(name, dom, tasks, repeats, sandbox, concurrency, seed)
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool()  # one per event loop: asyncio primitives are bound to the loop that made them
    try:
        return await check_tasks(name, dom, tasks, repeats, pool, concurrency, seed)
    finally:
        await pool.close()


async def check_domain_with_probes(name: str, n: int = 20, repeats: int = 2, seed: int = 0, difficulty: float = 1.0,
                                   probe_n: int = 4, only: set[str] | None = None, sandbox: Any = None,
                                   concurrency: int = 4) -> tuple[CheckReport, Any]:
    """`check_domain` plus `probe_check.probe_tasks` on the first `probe_n` tasks (0: no probes, None report)."""
    from posttrain.verifiers.soundness.probe_check import probe_tasks

    dom = build(name, kind="domain")
    tasks = dom.generate(max(n, probe_n), seed, difficulty)
    missing = 0
    if any(t.oracle is None for t in tasks):  # as for task files: only tasks with a known honest answer (ifbench)
        every = dom.generate(10_000, seed, difficulty)
        tasks = [t for t in every if t.oracle is not None][: max(n, probe_n)]
        missing = len(every) - sum(t.oracle is not None for t in every)

    async def both(pool: Any) -> tuple[CheckReport, Any]:
        report = await check_tasks(name, dom, tasks[:n], repeats, pool, concurrency, seed)
        if missing:
            report.failures.insert(0, f"{missing} tasks of the split have no oracle answer: not checked")
        if not tasks:
            report.oracle_pass_rate = 0.0  # nothing shows an honest answer can score 1: unsound
        probes = await probe_tasks(name, tasks[:probe_n], repeats, pool, seed, concurrency, only) if probe_n > 0 else None
        return report, probes

    if sandbox is not None:
        return await both(sandbox)
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool()
    try:
        return await both(pool)
    finally:
        await pool.close()


class GenericWrong:
    """The wrong answer for tasks of a domain that is not registered (e.g. imported rows)."""

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        return f"-{rng.randrange(10**6, 10**7)}"  # a number no task's answer is, and no code or plan


async def check_file_with_probes(path: Any, n: int = 20, repeats: int = 2, seed: int = 0, probe_n: int = 4,
                                 only: set[str] | None = None) -> list[tuple[CheckReport, Any]]:
    """`check_domain_with_probes` for the tasks of a task file, per domain (first `n` with an oracle each)."""
    from posttrain.registry import registry
    from posttrain.sandbox import SandboxPool
    from posttrain.tasks.io import load_tasks
    from posttrain.verifiers.soundness.probe_check import probe_tasks

    by_domain: dict[str, list[Task]] = {}
    for t in load_tasks(path):
        by_domain.setdefault(t.domain, []).append(t)
    pool = SandboxPool()
    out = []
    try:
        for name, tasks in by_domain.items():
            dom = build(name, kind="domain") if name in registry("domain").names() else GenericWrong()
            with_oracle = [t for t in tasks if t.oracle is not None]
            report = await check_tasks(name, dom, with_oracle[:n], repeats, pool, seed=seed)
            missing = len(tasks) - len(with_oracle)
            if missing:
                report.failures.insert(0, f"{missing} of {len(tasks)} tasks have no oracle answer: not checked")
            if not with_oracle:
                report.oracle_pass_rate = 0.0  # nothing shows an honest answer can score 1: unsound
            probes = await probe_tasks(name, tasks[:probe_n], repeats, pool, seed, 4, only) if probe_n > 0 else None
            out.append((report, probes))
    finally:
        await pool.close()
    return out
