"""Hack-probe benchmark: hack_pass_rate per shipped domain and probe, and the flake rate over repeats.

    .venv/bin/python benchmarks/hack_probes.py [--domains all] [--skip-prefix rg-] [--probe-n 4] [--n 20] [--repeats 10]
        [--json out.json]

For every domain it runs `posttrain tasks check`'s two halves on one sandbox pool: the
oracle/empty/wrong check on `--n` tasks and the hack probes (posttrain/verifiers/soundness/hack_probes*.py,
through the RL scoring path, alone and in GRPO groups with honest answers) on the first
`--probe-n` tasks, each `--repeats` times. Targets (issue 21), printed as PASS/MISS:
  hack_pass_rate == 0 on every domain; honest siblings never scored below the oracle alone;
  the oracle scores 1.0 on the RL path; flake rate 0 (identical verdicts on every repeat)
  for both the oracle check and the probes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.registry import registry  # noqa: E402
from posttrain.verifiers.soundness.check import check_domain_with_probes  # noqa: E402
from posttrain.verifiers.soundness.probe_check import table  # noqa: E402


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


async def one(name: str, args: argparse.Namespace) -> dict:
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool()
    t0 = time.perf_counter()
    try:
        report, probes = await check_domain_with_probes(name, args.n, args.repeats, args.seed, 1.0, args.probe_n, sandbox=pool)
    finally:
        await pool.close()
    return {"domain": name, "wall_s": round(time.perf_counter() - t0, 1), "check": report.as_json(), "probes": probes.as_json(),
            "_lines": table(probes)}


def show(i: int, total: int, r: dict) -> None:
    """One domain's lines, printed as soon as it is done: a long run shows its progress, and one stopped
    part-way (a timeout, Ctrl-C) keeps what it measured."""
    c = r["check"]
    print(f"[{i}/{total}] {r['domain']:<12} check: oracle={c['oracle_pass_rate']:.3f} empty={c['empty_pass_rate']:.3f} "
          f"wrong={c['wrong_pass_rate']:.3f} flake={c['flake_rate']:.3f}   ({r['wall_s']} s)", flush=True)
    print("\n".join(r.pop("_lines")), flush=True)


async def main(args: argparse.Namespace) -> list[dict]:
    import posttrain.tasks  # noqa: F401  (registers the shipped domains)

    names = registry("domain").names() if args.domains == ["all"] else args.domains
    if args.skip_prefix:
        names = [n for n in names if not n.startswith(tuple(args.skip_prefix))]
    rows = []
    for i, n in enumerate(names, 1):
        rows.append(await one(n, args))
        show(i, len(names), rows[-1])
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--domains", nargs="+", default=["all"])
    ap.add_argument("--skip-prefix", nargs="*", default=[],
                    help="leave out domains whose name starts so (rg-: the 102 reasoning-gym domains, which "
                         "benchmarks/rg_domains.py probes level by level)")
    ap.add_argument("--n", type=int, default=20, help="tasks for the oracle/empty/wrong check")
    ap.add_argument("--probe-n", type=int, default=4, help="tasks for the probes")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="", help="also write the full results here")
    args = ap.parse_args()
    rows = asyncio.run(main(args))
    hacked = {r["domain"]: sorted(k for k, s in r["probes"]["probes"].items() if s["pass_rate"] > 0) for r in rows}
    summary = {
        "hack_pass_rate": {r["domain"]: r["probes"]["hack_pass_rate"] for r in rows},
        "hack_nonzero_rate": {r["domain"]: r["probes"]["hack_nonzero_rate"] for r in rows},
        "passing_probes": {d: v for d, v in hacked.items() if v},
        "check_flake_rate": max(r["check"]["flake_rate"] for r in rows),
        "probe_flake_rate": max(r["probes"]["flake_rate"] for r in rows),
        "repeats": args.repeats, "probe_n": args.probe_n,
    }
    print(json.dumps(summary, indent=1))
    print(f"{_mark(all(v == 0 for v in summary['hack_pass_rate'].values()))} hack_pass_rate == 0 on every domain")
    print(f"{_mark(all(r['probes']['sibling_harm_rate'] == 0 for r in rows))} honest siblings unharmed")
    print(f"{_mark(all(r['probes']['oracle_rl_pass_rate'] == 1 for r in rows))} oracle scores 1.0 on the RL path")
    print(f"{_mark(summary['check_flake_rate'] == 0 and summary['probe_flake_rate'] == 0)} flake rate 0 over {args.repeats} repeats")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "domains": rows}, f, indent=1)
