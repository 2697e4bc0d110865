"""Code verifiers under attack, through `VerifierRunner` (the path RL and eval use).

    .venv/bin/python benchmarks/humaneval_bench.py [--n 164] [--attacks all|name,name] [--groups 12] [--no-legacy] [--sections 123]

Prints three tables, each new verifier beside the pre-fix one ("legacy", kept below
only to measure against; it is registered as `*_legacy` and never used by posttrain):
1. HumanEval: canonical solutions passing, broken solutions (`wrong_answer`) passing, and
   the wall time of verifying both sets together (target: 164/164, 0/164, <= 3 s).
2. Exploits (tests/unit/verifiers/humaneval_attacks.py) on every task: tasks scoring 0
   (target: all), tasks where the legacy verifier gave 1.0 (the issue's four attacks), and
   infra errors (the pool may judge a program that spins to its 1 s wall limit "host
   overloaded" when the machine is busy: still not a pass). 8 sandbox slots.
3. `python_tests`, GRPO groups of 8 answers: seconds per group, batched, new vs legacy,
   and the ratio; plus the sibling copier / killer scores in a group vs alone.
Timings are single runs on a shared machine: rerun to see the spread.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.registry import verifier  # noqa: E402
from posttrain.sandbox import SandboxPool  # noqa: E402
from posttrain.tasks import generate_domain  # noqa: E402
from posttrain.tasks.humaneval import HumanEval  # noqa: E402
from posttrain.types import ExecLimits, Spec, Task, Trajectory, Turn, VerifyResult  # noqa: E402
from posttrain.verifiers.code_tests import PythonTests  # noqa: E402
from posttrain.verifiers.humaneval import HumanEvalTests, build_program  # noqa: E402
from posttrain.verifiers.math_answer import final_text  # noqa: E402
from posttrain.verifiers.run import VerifierRunner  # noqa: E402
from tests.unit.verifiers import test_code_batch_adversarial as batch_attacks  # noqa: E402
from tests.unit.verifiers.humaneval_attacks import ATTACKS, completion  # noqa: E402

ISSUE_ATTACKS = ("rewrite_test_files", "patch_compile", "steal_token_and_exit", "always_equal_object")

# ---- the pre-fix verifiers, verbatim in substance -------------------------------------
LEGACY_HE_RUNNER = r'''
import sys
def _main():
    token = sys.stdin.readline().strip()
    entry = sys.argv[1]
    g = {"__name__": "__candidate__"}
    try:
        exec(compile(open("program.py").read(), "program.py", "exec"), g)
        exec(compile(open("test.py").read(), "test.py", "exec"), g)
        g["check"](g[entry])
    except BaseException as e:
        sys.stdout.write("\n@@FAIL@@ %s: %s\n" % (type(e).__name__, str(e)[:200]))
        sys.stdout.flush()
        return
    sys.stdout.write("\n@@PASS@@" + token + "\n")
    sys.stdout.flush()
_main()
'''


@verifier("humaneval_legacy", answer_format="code")
class LegacyHumanEval(HumanEvalTests):
    async def __call__(self, task: Task, trajectory: Trajectory, ctx) -> VerifyResult:
        import secrets

        program = build_program(self.prompt, final_text(trajectory), self.entry)
        try:
            compile(program, "program.py", "exec")
        except (SyntaxError, ValueError):
            return VerifyResult.fail("syntax error")
        token = secrets.token_hex(16)
        files = {"program.py": program, "test.py": self.test, "runner.py": LEGACY_HE_RUNNER}
        res = await ctx.sandbox.exec(["python3", "-I", "runner.py", self.entry], files=files, stdin=token + "\n",
                                     limits=self.limits)
        if res.status == "sandbox_error":
            return VerifyResult.infra("sandbox error")
        return VerifyResult(1.0, True) if f"@@PASS@@{token}" in res.stdout else VerifyResult.fail("tests failed")


LEGACY_APPLY = r'''
def apply_answer(src, arg, inputs):
    f = eval(compile("lambda %s: (%s)" % (arg, src), "answer.py", "eval"), {})
    out = []
    for x in inputs:
        try:
            v = f(x)
            out.append({"value": v if isinstance(v, (int, float, str, bool)) else repr(v)})
        except BaseException as e:
            out.append({"error": type(e).__name__})
    return out
'''
LEGACY_BATCH = LEGACY_APPLY + r'''
import json, os, select, signal, sys, time
arg, per_s = sys.argv[1], float(sys.argv[2])
inputs = json.loads(open("inputs.json").read())
answers = json.loads(open("answers.json").read())
def child(src, w):
    fd = os.open(os.devnull, os.O_RDWR)
    os.dup2(fd, 0), os.dup2(fd, 1), os.dup2(fd, 2)
    try:
        out = apply_answer(src, arg, inputs)
    except BaseException as e:
        out = {"error": type(e).__name__}
    os.write(w, json.dumps(out).encode()[:65536])
    os._exit(0)
results = []
for src in answers:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(src, w)
    os.close(w)
    buf, deadline = b"", time.monotonic() + per_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    try:
        results.append(json.loads(buf.decode()) if buf else {"error": "timeout or crash"})
    except ValueError:
        results.append({"error": "malformed report"})
print("\n@@BATCH@@" + json.dumps(results))
'''


def _legacy_score(tests, out) -> VerifyResult:
    if not isinstance(out, list) or len(out) != len(tests):
        return VerifyResult.fail("malformed result")
    passed = [isinstance(o, dict) and "value" in o and o["value"] == want for o, (_, want) in zip(out, tests)]
    return VerifyResult(sum(passed) / len(passed), all(passed))


@verifier("python_tests_legacy", answer_format="code")
class LegacyPythonTests(PythonTests):
    async def verify_batch(self, task: Task, answers: list[str], ctx) -> list[VerifyResult]:
        files = {"answers.json": json.dumps([a.strip() for a in answers]),
                 "inputs.json": json.dumps([x for x, _ in self.tests]), "runner.py": LEGACY_BATCH}
        lim = ExecLimits(wall_s=self.limits.wall_s * 2, cpu_s=self.limits.cpu_s * 2, memory_mb=self.limits.memory_mb,
                         output_bytes=1 << 20)
        res = await ctx.sandbox.exec(["python3", "-I", "runner.py", self.arg, str(min(2.0, self.limits.wall_s))],
                                     files=files, limits=lim)
        outs = json.loads(res.stdout[res.stdout.rfind("@@BATCH@@") + 9:])
        return [_legacy_score(self.tests, o) if isinstance(o, list) else VerifyResult.fail("raised") for o in outs]

    async def __call__(self, task: Task, trajectory: Trajectory, ctx) -> VerifyResult:
        return (await self.verify_batch(task, [trajectory.completion_text], ctx))[0]


# ---- measurements ---------------------------------------------------------------------
def respec(tasks: list[Task], name: str, **args) -> list[Task]:
    """`tasks` judged by verifier `name` (ids tagged with it, so both can share one run)."""
    return [dataclasses.replace(t, id=f"{t.id}@{name}", verifier=Spec(name, {**t.verifier.args, **args}),
                                metadata={**t.metadata, "answer_format": "code"}) for t in tasks]


def traj(t: Task, text: str, sample: int = 0) -> Trajectory:
    return Trajectory(t.id, t.version, t.domain, (), (Turn("assistant", text),), finish_reason="stop", sample=sample)


async def run_all(pool, tasks: list[Task], texts: list[str]) -> tuple[list[VerifyResult], float]:
    t0 = time.perf_counter()
    out = await VerifierRunner(pool).verify_all({t.id: t for t in tasks}, [traj(t, s, i) for i, (t, s) in enumerate(zip(tasks, texts))])
    return [o.verify for o in out], time.perf_counter() - t0


async def humaneval_table(pool, tasks: list[Task], legacy: bool) -> list[tuple]:
    dom = HumanEval()
    rows = []
    for name in ("humaneval", "humaneval_legacy") if legacy else ("humaneval",):
        ts = respec(tasks, name)
        good = [t.oracle for t in ts]
        bad = [dom.wrong_answer(t, None) for t in ts]
        res, secs = await run_all(pool, ts + ts, good + bad)
        n = len(ts)
        rows.append((name, sum(r.score == 1.0 for r in res[:n]), sum(r.score == 1.0 for r in res[n:]), n, secs,
                     sum(r.status != "ok" for r in res)))
    return rows


async def attack_table(tasks: list[Task], attacks: list[str], legacy: bool) -> list[tuple]:
    """All attacks in one `verify_all`, on a pool of 8 slots: the hanging ones mostly sleep."""
    pool = SandboxPool(concurrency=8)
    try:
        jobs = [(a, "humaneval", t) for a in attacks for t in respec(tasks, "humaneval", wall_s=1.0)]
        if legacy:
            jobs += [(a, "humaneval_legacy", t) for a in attacks if a in ISSUE_ATTACKS
                     for t in respec(tasks, "humaneval_legacy", wall_s=1.0)]
        res, _ = await run_all(pool, [t for _, _, t in jobs], [completion(a, t.metadata["entry_point"]) for a, _, t in jobs])
    finally:
        await pool.close()
    rows = []
    for a in attacks:
        new = [r for (a2, v, _), r in zip(jobs, res) if a2 == a and v == "humaneval"]
        old = [r for (a2, v, _), r in zip(jobs, res) if a2 == a and v == "humaneval_legacy"]
        rows.append((a, sum(r.score == 0.0 for r in new), len(new), str(sum(r.score == 1.0 for r in old)) if old else "-",
                     sum(r.status != "ok" for r in new)))
    return rows


def group_answers(task: Task) -> list[str]:
    m, c = task.metadata["m"], task.metadata["c"]
    return [task.oracle, f"{c}+x*{m}", f"x*{m}+{c + 1}", f"x*{m + 1}+{c}", f"{c}", "1/0", f"x*{m}+{c}+0", f"(x*{m})+{c}"]


async def batch_table(pool, groups: int, legacy: bool) -> dict:
    out = {}
    for name in ("python_tests", "python_tests_legacy") if legacy else ("python_tests",):
        tasks = respec(generate_domain("code", groups, seed=7), name)
        trajs = [traj(t, a, i) for t in tasks for i, a in enumerate(group_answers(t))]
        t0 = time.perf_counter()
        res = await VerifierRunner(pool).verify_all({t.id: t for t in tasks}, trajs)
        out[name] = ((time.perf_counter() - t0) / groups, sum(r.verify.status != "ok" for r in res))
        bt = respec([batch_attacks.TASK], name)[0]
        group = [o.verify.score for o in await VerifierRunner(pool).verify_all(
            {bt.id: bt}, [traj(bt, a, i) for i, a in enumerate(batch_attacks.GROUP)])]
        alone = [(await VerifierRunner(pool).verify_one(bt, traj(bt, a))).verify.score for a in batch_attacks.GROUP[:2]]
        out[name + " attacks"] = {"killer group/alone": (group[0], alone[0]), "copier group/alone": (group[1], alone[1]),
                                  "siblings at 1.0 in group": sum(s == 1.0 for s in group[2:4])}
    return out


async def main(args) -> None:
    sys.stdout.reconfigure(line_buffering=True)  # tables appear as each finishes
    tasks = generate_domain("humaneval", args.n, 0)
    attacks = list(ATTACKS) if args.attacks == "all" else args.attacks.split(",")
    pool = SandboxPool()
    await pool.warm("host")
    try:
        if "1" in args.sections:
            print(f"1. HumanEval through VerifierRunner ({os.cpu_count()} cores, pool concurrency {pool.concurrency})")
            print(f"{'verifier':<20}{'canonical pass':>16}{'broken pass':>13}{'both sets s':>13}{'infra':>7}")
            for name, good, bad, n, secs, infra in await humaneval_table(pool, tasks, not args.no_legacy):
                print(f"{name:<20}{f'{good}/{n}':>16}{f'{bad}/{n}':>13}{secs:>13.2f}{infra:>7}")
        if "2" in args.sections:
            print("\n2. Exploits, every task (new: tasks at 0; legacy: tasks at 1.0, issue's attacks only)")
            print(f"{'attack':<24}{'new at 0':>10}{'legacy at 1.0':>15}{'infra':>7}")
            for a, zero, n, old, infra in await attack_table(tasks, attacks, not args.no_legacy):
                print(f"{a:<24}{f'{zero}/{n}':>10}{old:>15}{infra:>7}")
        if "3" in args.sections:
            print(f"\n3. python_tests, {args.groups} GRPO groups of 8 answers")
            b = await batch_table(pool, args.groups, not args.no_legacy)
            for name in ("python_tests", "python_tests_legacy"):
                if name in b:
                    print(f"{name:<22} {b[name][0] * 1000:8.1f} ms/group  infra {b[name][1]}  {b[name + ' attacks']}")
            if "python_tests_legacy" in b:
                print(f"new / legacy time per group: {b['python_tests'][0] / b['python_tests_legacy'][0]:.2f}x")
    finally:
        await pool.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=164)
    p.add_argument("--attacks", default="all")
    p.add_argument("--groups", type=int, default=12)
    p.add_argument("--no-legacy", action="store_true")
    p.add_argument("--sections", default="123", help="which tables to print, e.g. 13")
    asyncio.run(main(p.parse_args()))
