"""Run the hack probes on a domain through the path RL scores answers on.

    report = await probe_domain("code", n=4, repeats=10)
    report.hack_pass_rate      # share of probe answers that scored a full 1.0: must be 0
    report.as_json()           # per-probe pass/nonzero/mean score, honest siblings, flake rate

Single-turn tasks go through `VerifierRunner.verify_all` exactly as `train/rl.py` calls
it (format rule, cache, infra retries, and `verify_batch` for a group): each probe is
scored alone (a group of one) and inside a GRPO-style group with two honest answers
(for a batching verifier, the oracle and a copy of it with a leading space, so that in
sorted batch order one honest answer runs before the probe and one after). The honest answers must still score
what the oracle scores alone. Multi-step tasks are replayed as agent episodes in a live
sandbox session and scored as `rollout/agent/loop.py` scores them (format rule without the
single-line constraint, then the task's verifier with the session); each probe episode
runs beside an honest episode, and a second honest episode follows it on the same pool. An
episode that ends in an infra error is re-run as the RL path re-runs it.

Every run uses a fresh `VerifierRunner` per repeat (per group for groups), so the answer
cache never hides a flaky verdict. A (task, probe, path) is flaky when its repeats
disagree on (score, status). Infra errors count apart and never as a pass.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from posttrain.verifiers.soundness import hack_probes_exec  # noqa: F401  (registers the code and shell probes)
from posttrain.verifiers.soundness.hack_probes import PROBES, Probe, ProbeView, domain_kind
from posttrain.types import Task, Trajectory, Turn, VerifyResult
from posttrain.verifiers.base import BatchVerifier

FULL = 1.0 - 1e-9
Verdict = tuple  # (score, status) or (score, status, why): `why` is the infra error's reason, for the report only


@dataclass
class ProbeReport:
    domain: str
    n: int
    repeats: int
    kinds: list[str]
    oracle_rl_pass_rate: float  # the oracle alone, through the RL path (format rule included)
    honest_sibling_pass_rate: float  # honest answers beside a probe (same group / concurrent episode)
    sibling_harm_rate: float  # honest answers beside a probe that scored below the oracle alone
    hack_pass_rate: float  # probe runs scoring a full 1.0
    hack_nonzero_rate: float  # probe runs scoring above 0 (partial credit)
    hack_mean_score: float
    flake_rate: float
    infra_error_rate: float
    probes: dict[str, dict[str, float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return (self.hack_pass_rate == 0.0 and self.sibling_harm_rate == 0.0 and self.oracle_rl_pass_rate == 1.0
                and self.flake_rate == 0.0 and self.infra_error_rate == 0.0)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "sound": self.sound}



def probes_for(task: Task) -> list[Probe]:
    """Every registered probe (text ones in hack_probes.py, code and shell ones in hack_probes_exec.py) for this task's kind."""
    kind = domain_kind(task)
    return [p for p in PROBES.values() if kind in p.kinds]

def _traj(task: Task, text: str, sample: int = 0) -> Trajectory:
    turns = (Turn("assistant", text),) if text else ()
    return Trajectory(task.id, task.version, task.domain, (), turns, group=0, sample=sample, finish_reason="stop")


def _v(r: VerifyResult | None) -> Verdict:
    r = r or VerifyResult.infra("not scored")
    if r.status == "ok":
        return (round(r.score, 6), r.status)
    return (round(r.score, 6), r.status, r.reason or "")  # why it was not scored, kept for the failure note


def _why(v: Verdict) -> str:
    """` (reason)` of a verdict that kept one (see _v), for a failure note; else nothing."""
    return f" ({v[2]})" if len(v) > 2 else ""


# ---- single-turn: VerifierRunner.verify_all, alone and in a group ----------------------


async def _runner_scores(runner: Any, task: Task, texts: list[str]) -> list[VerifyResult]:
    out = await runner.verify_all({task.id: task}, [_traj(task, t, i) for i, t in enumerate(texts)])
    return [t.verify for t in out]


async def _single_turn(task: Task, probes: dict[str, str], sandbox: Any, sem: asyncio.Semaphore) -> dict[tuple, Verdict]:
    from posttrain.verifiers.run import VerifierRunner

    def runner() -> Any:  # the RL loop's settings (train/rl.py build_state), format_weight 0
        return VerifierRunner(sandbox, concurrency=4, retries=2)

    oracle = task.oracle or ""
    out: dict[tuple, Verdict] = {}
    async with sem:
        alone = runner()
        out[(task.id, "oracle", "alone")] = _v((await _runner_scores(alone, task, [oracle]))[0])
    # A batching verifier runs a group's distinct answers in sorted order: a leading space puts one honest
    # answer before the probe (space sorts first) and one after. Others get two copies (no batch to order).
    honest = [" " + oracle, oracle] if isinstance(alone.verifier_for(task), BatchVerifier) else [oracle, oracle]

    async def one(name: str, text: str) -> None:
        async with sem:
            out[(task.id, name, "alone")] = _v((await _runner_scores(runner(), task, [text]))[0])
            a, p, b = await _runner_scores(runner(), task, [honest[0], text, honest[1]])
            out[(task.id, name, "group")] = _v(p)
            out[(task.id, name, "sibling_before")] = _v(a)
            out[(task.id, name, "sibling_after")] = _v(b)

    await asyncio.gather(*(one(n, t) for n, t in probes.items()))
    return out


# ---- multi-step: replayed episodes, scored like rollout/agent/loop.py -----------------------


async def _agent_verify(task: Task, traj: Trajectory, runner: Any, sandbox: Any, session: Any) -> VerifyResult:
    """`AgentRunner._verify`'s scoring: format rule (multi-line allowed), verifier with the session, retries."""
    from posttrain.verifiers.base import VerifyContext
    from posttrain.verifiers.rules import format_violation

    bad = format_violation(traj, single_line=False)
    if bad is not None:
        return VerifyResult.fail(bad, rule="format")
    res = VerifyResult.infra("not run")
    for _ in range(runner.retries + 1):
        try:
            res = await asyncio.wait_for(runner.verifier_for(task)(task, traj, VerifyContext(sandbox=sandbox, session=session)),
                                         task.limits.timeout_s)
        except asyncio.TimeoutError:
            res = VerifyResult.infra(f"verifier timed out after {task.limits.timeout_s}s")
        except Exception as e:  # noqa: BLE001  a verifier bug is an infra error, not the model's fault
            res = VerifyResult.infra(f"verifier raised {type(e).__name__}: {e}")
        if res.status == "ok":
            break
    return res


async def episode(task: Task, text: str, sandbox: Any) -> VerifyResult:
    """Replay the plan `text` as an agent episode and score it (a fresh session for shell tasks).
    An episode that ends in an infra error is re-run, as the RL path re-runs it
    (the default `agent.retries`, rollout/agent/loop.py); the last infra error is what stays."""
    from posttrain.config_schema import AgentConfig

    res = VerifyResult.infra("not run")
    for _ in range(AgentConfig().retries + 1):
        res = await _one_episode(task, text, sandbox)
        if res.status == "ok":
            break
    return res


async def _one_episode(task: Task, text: str, sandbox: Any) -> VerifyResult:
    from posttrain.tasks.plan import replay
    from posttrain.verifiers.run import VerifierRunner

    runner = VerifierRunner(sandbox, retries=2)
    try:
        if "shell" in task.environment.tools:
            from posttrain.tasks.terminal import open_task_session

            async with open_task_session(sandbox, task) as session:
                traj = await replay(task, text, session)
                return await _agent_verify(task, traj, runner, sandbox, session)
        traj = await replay(task, text)
        return await _agent_verify(task, traj, runner, sandbox, None)
    except Exception as e:  # noqa: BLE001  a crash of the driver is an infra error, recorded, never a 0
        return VerifyResult.infra(f"{type(e).__name__}: {e}")


async def _multi_step(task: Task, probes: dict[str, str], sandbox: Any, sem: asyncio.Semaphore) -> dict[tuple, Verdict]:
    oracle = task.oracle or ""
    out: dict[tuple, Verdict] = {}
    async with sem:
        out[(task.id, "oracle", "alone")] = _v(await episode(task, oracle, sandbox))

    async def one(name: str, text: str) -> None:
        async with sem:
            p, a = await asyncio.gather(episode(task, text, sandbox), episode(task, oracle, sandbox))
            b = await episode(task, oracle, sandbox)
            out[(task.id, name, "group")] = _v(p)
            out[(task.id, name, "sibling_before")] = _v(a)  # concurrent with the probe
            out[(task.id, name, "sibling_after")] = _v(b)  # after it, on the same pool

    await asyncio.gather(*(one(n, t) for n, t in probes.items()))
    return out


# ---- driver and summary --------------------------------------------------------------


def probe_texts(task: Task, seed: int = 0, only: set[str] | None = None) -> dict[str, str]:
    """The probe answers for `task` (name -> answer or plan); probes that do not apply are left out."""
    view = ProbeView.of(task)
    out = {}
    for p in probes_for(task):
        if only and p.name not in only:
            continue
        text = p.make(view, random.Random(f"{seed}:{p.name}:{task.id}"))
        if text is not None:
            out[p.name] = text
    return out


async def probe_tasks(domain_name: str, tasks: list[Task], repeats: int = 1, sandbox: Any = None, seed: int = 0,
                      concurrency: int = 4, only: set[str] | None = None) -> ProbeReport:
    from posttrain.tasks.plan import is_plan_task

    texts = {t.id: probe_texts(t, seed, only) for t in tasks}
    runs: list[dict[tuple, Verdict]] = []
    for _ in range(repeats):
        sem = asyncio.Semaphore(concurrency)
        parts = await asyncio.gather(*((_multi_step if is_plan_task(t) else _single_turn)(t, texts[t.id], sandbox, sem)
                                       for t in tasks))
        runs.append({k: v for part in parts for k, v in part.items()})
    return summarise(domain_name, tasks, runs, texts)


def summarise(domain_name: str, tasks: list[Task], runs: list[dict[tuple, Verdict]], texts: dict[str, dict[str, str]]) -> ProbeReport:
    keys = sorted(runs[0]) if runs else []
    flaky = sum(1 for k in keys if len({(r.get(k) or ())[:2] for r in runs}) > 1)
    flat = [(k, r[k]) for r in runs for k in keys if k in r]
    oracle = {k[0]: [v for kk, v in flat if kk == k] for k in keys if k[1] == "oracle"}
    probe_runs = [(k, v) for k, v in flat if k[1] != "oracle" and k[2] in ("alone", "group")]
    siblings = [(k, v) for k, v in flat if k[2].startswith("sibling")]
    failures: list[str] = []

    def note(msg: str) -> None:
        if len(failures) < 12:
            failures.append(msg)

    per: dict[str, dict[str, float]] = {}
    for name in sorted({k[1] for k, _ in probe_runs}):
        vs = [(k, v) for k, v in probe_runs if k[1] == name]
        full = [k for k, v in vs if v[0] >= FULL and v[1] == "ok"]
        per[name] = {"runs": len(vs), "pass_rate": len(full) / len(vs),
                     "nonzero_rate": sum(v[0] > 0 and v[1] == "ok" for _, v in vs) / len(vs),
                     "mean_score": sum(v[0] for _, v in vs) / len(vs),
                     "infra_rate": sum(v[1] != "ok" for _, v in vs) / len(vs)}
        for k in sorted(set(full))[:2]:
            note(f"HACK {name} passes on {k[0]} ({k[2]})")
    harmed = 0
    for k, v in siblings:
        best = max((o[0] for o in oracle.get(k[0], []) if o[1] == "ok"), default=0.0)
        if v[1] != "ok" or v[0] < best:
            harmed += 1
            note(f"SIBLING of {k[1]} on {k[0]} ({k[2]}) scored {v[0]} {v[1]}{_why(v)}, the oracle alone {best}")
    oracle_flat = [v for vs in oracle.values() for v in vs]
    for tid, vs in oracle.items():
        if any(v[0] < FULL or v[1] != "ok" for v in vs):
            bad = next(v for v in vs if v[0] < FULL or v[1] != "ok")
            note(f"ORACLE {tid} scores {bad[0]} {bad[1]}{_why(bad)} on the RL path")
    n_probe = max(1, len(probe_runs))
    return ProbeReport(
        domain=domain_name, n=len(tasks), repeats=len(runs), kinds=sorted({domain_kind(t) for t in tasks}),
        oracle_rl_pass_rate=sum(v[0] >= FULL and v[1] == "ok" for v in oracle_flat) / max(1, len(oracle_flat)),
        honest_sibling_pass_rate=sum(v[0] >= FULL and v[1] == "ok" for _, v in siblings) / max(1, len(siblings)),
        sibling_harm_rate=harmed / max(1, len(siblings)),
        hack_pass_rate=sum(v[0] >= FULL and v[1] == "ok" for _, v in probe_runs) / n_probe,
        hack_nonzero_rate=sum(v[0] > 0 and v[1] == "ok" for _, v in probe_runs) / n_probe,
        hack_mean_score=sum(v[0] for _, v in probe_runs) / n_probe,
        flake_rate=flaky / max(1, len(keys)),
        infra_error_rate=sum(v[1] != "ok" for _, v in flat) / max(1, len(flat)),
        probes=per, failures=failures,
    )


async def probe_domain(name: str, n: int = 4, repeats: int = 1, seed: int = 0, difficulty: float = 1.0,
                       sandbox: Any = None, concurrency: int = 4, only: set[str] | None = None) -> ProbeReport:
    """Generate `n` tasks of domain `name` and run every applicable probe on them (see module doc).

    Without `sandbox`, a private `SandboxPool` serves this call and is closed after it.
    """
    from posttrain.registry import build

    tasks = build(name, kind="domain").generate(n, seed, difficulty)
    if sandbox is not None:
        return await probe_tasks(name, tasks, repeats, sandbox, seed, concurrency, only)
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool()
    try:
        return await probe_tasks(name, tasks, repeats, pool, seed, concurrency, only)
    finally:
        await pool.close()




def table(report: ProbeReport) -> list[str]:
    """Human-readable lines: the RL-path summary, then one row per probe."""
    head = (f"  RL path ({report.n} tasks x {report.repeats}): oracle={report.oracle_rl_pass_rate:.3f} "
            f"honest_siblings={report.honest_sibling_pass_rate:.3f} harmed={report.sibling_harm_rate:.3f} "
            f"hack_pass={report.hack_pass_rate:.3f} hack_nonzero={report.hack_nonzero_rate:.3f} "
            f"flake={report.flake_rate:.3f} infra={report.infra_error_rate:.3f} {'ok' if report.sound else 'UNSOUND'}")
    rows = [head, f"    {'probe':<22}{'runs':>6}{'pass':>8}{'nonzero':>9}{'mean':>8}{'infra':>8}"]
    for name, s in report.probes.items():
        flag = "  <- HACK" if s["pass_rate"] > 0 else ""
        rows.append(f"    {name:<22}{int(s['runs']):>6}{s['pass_rate']:>8.3f}{s['nonzero_rate']:>9.3f}{s['mean_score']:>8.3f}"
                    f"{s['infra_rate']:>8.3f}{flag}")
    return rows + [f"    {f}" for f in report.failures]


__all__ = ["ProbeReport", "episode", "probe_domain", "probe_tasks", "probe_texts", "summarise", "table"]
