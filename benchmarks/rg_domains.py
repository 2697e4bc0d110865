"""The reasoning-gym family's soundness: every shipped `rg-*` domain through `posttrain tasks check`'s two
halves (oracle / empty / wrong, and the hack probes on the RL scoring path) plus candidate-pair answers.

    .venv/bin/python benchmarks/rg_domains.py                          # full: n=20, probe-n 4, repeats 2, levels 1 and 5
    .venv/bin/python benchmarks/rg_domains.py --n 3 --probe-n 2 --repeats 1 --levels 1 --domains rg-gcd rg-sudoku  # smoke
    .venv/bin/python benchmarks/rg_domains.py --all-generators        # also the excluded ones: why they are excluded

Per domain and difficulty level: the oracle must score 1 and the empty answer 0 on every task, the
wrong answer never 1, no hack probe 1 (hack_pass_rate == 0), and no candidate pair
(`posttrain/testing/pair_probes.py`: the oracle listed with a wrong answer) 1, and no one task's reference
passing every task (`constant_max` < 1, even where all references agree: a level whose every task has one
answer pays a policy that answers it to every task in full), all through the `VerifierRunner` as
`train/rl.py` calls it. Prints one line per (domain, level) and a PASS/MISS summary; `--json FILE` writes
every row. The small version of this runs in `make test` (tests/unit/tasks/test_reasoning_gym_check.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.registry import build  # noqa: E402
from posttrain.tasks import reasoning_gym as rg  # noqa: E402
from posttrain.verifiers.soundness.check import check_tasks  # noqa: E402
from posttrain.testing.pair_probes import pair_answers  # noqa: E402
from posttrain.verifiers.soundness.probe_check import probe_tasks  # noqa: E402


async def pair_pass_rate(dom, tasks, seed: int) -> tuple[float, list[str]]:
    """Share of candidate-pair answers that score a full 1.0 through the RL scoring path."""
    from posttrain.verifiers.soundness.check import score_once

    runs, passed, bad = 0, 0, []
    for t in tasks:
        wrong = dom.wrong_answer(t, random.Random(f"{seed}:{t.id}"))
        for text in pair_answers(t.oracle or "", wrong):
            r = await score_once(t, text, None)
            runs += 1
            if r.score >= 1.0 - 1e-9 and r.status == "ok":
                passed += 1
                bad.append(f"{t.id}: {text[:60]!r}")
    return passed / max(1, runs), bad[:3]


async def constant_answer(tasks) -> tuple[float, str, bool]:
    """(the largest share of `tasks` one answer passes, that answer, whether all tasks share it): each task's
    reference is tried on all of them; a policy answering it to every task would be paid that share."""
    from posttrain.verifiers.rg_answer import norm
    from posttrain.verifiers.soundness.check import score_once

    best, answer = 0.0, ""
    for c in sorted({t.oracle for t in tasks if t.oracle}):
        share = sum([(await score_once(t, c, None)).score >= 1.0 - 1e-9 for t in tasks]) / len(tasks)
        if share > best:
            best, answer = share, c
    return best, answer, all(norm(t.oracle or "") == norm(answer) for t in tasks)


async def check_one(name: str, level: float, args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    dom = build(name, kind="domain")
    tasks = dom.generate(max(args.n, args.probe_n), args.seed, level)
    report = await check_tasks(name, dom, tasks[: args.n], args.repeats, None, 4, args.seed)
    probes = await probe_tasks(name, tasks[: args.probe_n], args.repeats, None, args.seed, 4, None)
    pairs, pair_fail = await pair_pass_rate(dom, tasks[: args.probe_n], args.seed)
    const, const_answer, all_same = await constant_answer(tasks[: args.n])
    const_fail = [] if const < 1.0 else [f"one answer passes all {args.n} tasks: {const_answer[:40]!r}"
                                         + (" (every task's reference: a constant is always right here)" if all_same else "")]
    sound = report.sound and probes.sound and pairs == 0.0 and not const_fail
    return {"domain": name, "level": level, "n": len(tasks), "sound": sound,
            "oracle": report.oracle_pass_rate, "empty": report.empty_pass_rate, "wrong": report.wrong_pass_rate,
            "flake": report.flake_rate, "infra": report.infra_error_rate, "hack_pass_rate": probes.hack_pass_rate,
            "oracle_rl": probes.oracle_rl_pass_rate, "pair_pass_rate": pairs, "constant_max": const,
            "constant_answer": const_answer[:60],
            "failures": report.failures[:3] + probes.failures[:3] + pair_fail + const_fail,
            "wall_s": round(time.perf_counter() - t0, 2),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def levels_of(name: str, wanted: list[float]) -> list[float]:
    gen = name.removeprefix(rg.PREFIX)
    top = rg.TOP_LEVEL.get(gen, rg.MAX_DIFFICULTY) if gen in rg._factory().CURRICULA else rg.MIN_DIFFICULTY
    return sorted({min(lv, top) for lv in wanted})


async def main(args: argparse.Namespace) -> list[dict]:
    if args.all_generators:
        from posttrain.registry import domain, registry

        for g in rg.EXCLUDED:  # register them here too, to show why they are out
            if g != "composite" and rg.PREFIX + g not in registry("domain"):
                domain(rg.PREFIX + g)(rg._Factory(g))
    names = args.domains or [rg.PREFIX + g for g in (rg.GENERATORS if args.all_generators else rg.shipped())
                             if g != "composite"]
    rows = []
    for name in names:
        for level in levels_of(name, args.levels):
            try:
                row = await check_one(name, level, args)
            except Exception as e:  # noqa: BLE001  one broken generator must not hide the others
                row = {"domain": name, "level": level, "sound": False, "failures": [f"{type(e).__name__}: {e}"[:200]]}
            rows.append(row)
            print(f"{'ok  ' if row['sound'] else 'MISS'} {name:<32} L{level:g} " + " ".join(
                f"{k}={row[k]:.2f}" for k in ("oracle", "empty", "wrong", "hack_pass_rate", "pair_pass_rate", "constant_max")
                if k in row)
                + f" {row.get('wall_s', 0)}s rss={row.get('rss_mb', 0)}MB"
                + ("" if row["sound"] else "  " + " | ".join(row["failures"])), flush=True)
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--domains", nargs="*", default=None)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--probe-n", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--levels", type=float, nargs="+", default=[1.0, 5.0])
    ap.add_argument("--all-generators", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    out = asyncio.run(main(a))
    sound = [r for r in out if r["sound"]]
    shipped = sorted({r["domain"] for r in out} - {r["domain"] for r in out if not r["sound"]})
    print(f"{'PASS' if len(sound) == len(out) else 'MISS'} {len(sound)}/{len(out)} (domain, level) rows sound; "
          f"{len(shipped)} domains sound at every level; hack_pass_rate max "
          f"{max((r.get('hack_pass_rate', 1.0) for r in out), default=0):.3f}; constant_max mean "
          f"{sum(r.get('constant_max', 0) for r in out) / max(1, len(out)):.3f}; wall {time.perf_counter() - t0:.0f} s")
    if not a.domains:
        print(f"{'PASS' if len(shipped) >= 100 else 'MISS'} at least 100 domains shipped and sound: {len(shipped)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
