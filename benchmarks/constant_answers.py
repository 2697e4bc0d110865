"""A run's held-out lift above each domain's best constant answer (issue 39; seconds, no model).

    .venv/bin/python benchmarks/constant_answers.py runs/hundred_domains/curriculum-seed0

A small policy can gain held-out pass@1 by answering one string to every task of a domain whose labels
are skewed ("Yes" on syllogisms, "True" on yes/no graph questions): right for each task it passes, with
no checker hole, but the domain's base rate, not reasoning. This separates the two. For each domain of
RUN/tasks/heldout.jsonl, every gold answer of its held-out tasks is tried as the answer to all of them
through the RL scoring path (`score_once`: the format rule, then the task's verifier); the one that
passes most is the domain's best constant answer. Then, over the trained domains (RUN/summary.json):
- the mean pass@1 before and after RL (RUN/eval_before.json, eval_after.json) beside the best constant's;
- the same restricted to the tasks the best constant answer fails, with its exact McNemar p: the lift a
  constant policy could not have given;
- how many fail -> pass flips answered the domain's best constant.
The held-out domains get the same lines.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.eval.stats import mcnemar_exact  # noqa: E402
from posttrain.tasks.io import load_tasks  # noqa: E402
from posttrain.verifiers.soundness.check import score_once  # noqa: E402


async def _passes(task, text: str) -> bool:
    """`text` as the answer to `task`, scored as RL scores it (format rule, then the verifier)."""
    return (await score_once(task, text, None)).score >= 1.0 - 1e-9


def best_constants(tasks) -> dict[str, tuple[str, dict[str, bool]]]:
    """{domain: (its best constant answer, {task id: that answer passes})}; candidates: the domain's gold answers."""
    by = collections.defaultdict(list)
    for t in tasks:
        by[t.domain].append(t)

    async def go():
        out = {}
        for d, ts in sorted(by.items()):
            best = ("", {t.id: False for t in ts})
            for c in sorted({t.oracle for t in ts if t.oracle}):
                got = {t.id: await _passes(t, c) for t in ts}
                if sum(got.values()) > sum(best[1].values()):
                    best = (c, got)
            out[d] = best
        return out

    return asyncio.run(go())


def report(name: str, domains: list[str], consts, before: dict, after: dict) -> None:
    # a task with an infra error (no verdict: an arc_agi prompt past the context) is in domain_of but not in passed
    ids = [i for i, d in after["domain_of"].items() if d in set(domains) and i in before["passed"] and i in after["passed"]]
    const_pass = {i: consts[after["domain_of"][i]][1].get(i, False) for i in ids}
    n = len(ids)
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    print(f"{name} ({len(domains)} domains, {n} tasks): before {mean([before['passed'][i] for i in ids]):.3f}, "
          f"after {mean([after['passed'][i] for i in ids]):.3f}, best constant per domain {mean(list(const_pass.values())):.3f}")
    rest = [i for i in ids if not const_pass[i]]
    b = sum(1 for i in rest if not before["passed"][i] and after["passed"][i])  # fail -> pass
    c = sum(1 for i in rest if before["passed"][i] and not after["passed"][i])  # pass -> fail
    print(f"  on the {len(rest)} tasks the best constant fails: before {mean([before['passed'][i] for i in rest]):.3f}, "
          f"after {mean([after['passed'][i] for i in rest]):.3f}, {b} fail -> pass vs {c} pass -> fail, "
          f"McNemar p {mcnemar_exact(b, c):.3g}")
    flips = [i for i in ids if not before["passed"][i] and after["passed"][i]]
    const_flips = [i for i in flips if const_pass[i] and after["completions"][i].strip() == consts[after["domain_of"][i]][0].strip()]
    print(f"  fail -> pass flips: {len(flips)}, of which {len(const_flips)} answered the domain's best constant")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished quickstart run directory (eval_before.json, eval_after.json)")
    a = ap.parse_args()
    need = [a.run / "tasks" / "heldout.jsonl", a.run / "eval_before.json", a.run / "eval_after.json", a.run / "summary.json"]
    missing = [str(p) for p in need if not p.is_file()]
    if missing:
        sys.exit(f"{a.run}: not a finished quickstart run (missing {', '.join(missing)})")
    from posttrain.builtins import load_builtins

    load_builtins()
    tasks = load_tasks(need[0])
    before, after = (json.loads(p.read_text()) for p in need[1:3])
    gen = json.loads(need[3].read_text())["generalisation"]
    consts = best_constants(tasks)
    report("trained domains", gen["trained_domains"]["domains"], consts, before, after)
    report("held-out domains", gen["held_out_domains"]["domains"], consts, before, after)
    top = sorted(consts.items(), key=lambda kv: -sum(kv[1][1].values()) / max(1, len(kv[1][1])))[:10]
    print("largest constant baselines: " + ", ".join(
        f"{d} {c[:20]!r} {sum(p.values())}/{len(p)}" for d, (c, p) in top))


if __name__ == "__main__":
    main()
