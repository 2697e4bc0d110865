"""Long-task queues in the real RL loop (issue 39): step time and where every group went.

    .venv/bin/python benchmarks/longtail_loop.py [--steps 20] [--short-s 0.25] [--factor 10] [--slow-share 0.25]

Everything runs through `posttrain rl` (the CLI a user runs), on the built-in tiny model after one
SFT warm-up (arithmetic, stopped at a measured level so groups carry signal), on
`arith_remote` (benchmarks/plugins/remote_checks.py): arithmetic tasks checked by the real
`exact_numeric` verifier after a remote service's round trip, --short-s for most tasks and
--factor times that for a seeded --slow-share of them. Three arms from the same warmed-up
model and seed:

    short                          every check short (the baseline: the step without slow tasks)
    mixed in one domain            the slow share among the same domain's tasks, the synchronous loop
                                   (each step waits for its slowest group)
    mixed in one domain, longtail  the same, rl.longtail.enabled: nothing tells a slow task before it
                                   runs, so it starts in the short lane and is promoted out of the
                                   step's way after --long-factor times the median group
    slow domain                    the slow share as a domain of its own (an agent domain beside
                                   one-step ones), synchronous
    slow domain, longtail          the same with the queues: the domain's history routes its tasks
                                   to the long lane before they run

Reported per arm: the median and mean step time (steps after the first), the ratio to `short`
(target: longtail <= 1.3x), and from the metrics rows the long-tail accounting: every group
submitted was trained on (delivered), dropped as stale, failed, or is still in flight when the run
ends. Prints a markdown table and writes --json-out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "posttrain.cli.main"]
PLUGIN = ROOT / "benchmarks" / "plugins" / "remote_checks.py"


def posttrain(args: list[str], log: Path) -> None:
    t0 = time.perf_counter()
    r = subprocess.run(CLI + args, cwd=ROOT, capture_output=True, text=True)
    log.write_text(r.stdout + "\n--- stderr ---\n" + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"longtail_loop: `posttrain {args[0]}` exited {r.returncode} after "
                         f"{time.perf_counter() - t0:.0f} s; its output: {log}")


def domain(short_s: float, slow_s: float, share: float, own_domain: bool = False) -> str:
    """The tasks of an arm: a `share` of slow checks inside one domain, or (own_domain) as a domain of
    their own drawn with weight share : 1 - share."""
    args = f"args: {{short_s: {short_s}, slow_s: {slow_s}"
    if not own_domain:
        return f"tasks.domains={{arith_remote: {{n_train: 600, n_eval: 20, difficulty: 0.8, {args}, slow_share: {share}}}}}}}"
    return (f"tasks.domains={{arith_remote: {{weight: {1 - share}, n_train: 450, n_eval: 10, difficulty: 0.8, {args}, "
            f"slow_share: 0}}}}, arith_remote_slow: {{weight: {share}, n_train: 150, n_eval: 10, difficulty: 0.8, "
            f"{args}, slow_share: 1}}}}}}")


def summarise(run: Path) -> dict:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "time/step_s" in r]
    steps = [r["time/step_s"] for r in rows[1:]]  # the first step pays one-off start-up
    out = {"steps": len(rows), "step_median_s": statistics.median(steps), "step_mean_s": statistics.fmean(steps),
           "step_max_s": max(steps), "wall_s": sum(r["time/step_s"] for r in rows),
           "reward_mean": statistics.fmean(r.get("reward/mean", 0.0) for r in rows),
           "groups_trained": sum(r.get("groups/trained", 0) for r in rows)}
    if "longtail/submitted" in rows[0]:
        keys = ("submitted", "trained", "late", "stale_dropped", "failed")
        acc = {k: sum(r[f"longtail/{k}"] for r in rows) for k in keys}
        acc["in_flight_at_end"] = rows[-1]["longtail/in_flight"]
        acc["accounted"] = acc["submitted"] == acc["trained"] + acc["stale_dropped"] + acc["failed"] + \
            acc["in_flight_at_end"]
        out["longtail"] = acc
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--short-s", type=float, default=0.25)
    ap.add_argument("--factor", type=float, default=10.0)
    ap.add_argument("--slow-share", type=float, default=0.25)
    ap.add_argument("--long-concurrency", type=int, default=24,
                    help="rl.longtail.long_concurrency: slow groups in flight (a remote service's capacity; the "
                         "default 2 is for slow work on this machine's own cores)")
    ap.add_argument("--long-factor", type=float, default=3.0,
                    help="rl.longtail.long_factor: a group running past this many times the median is promoted")
    ap.add_argument("--out", default="runs/longtail_loop")
    ap.add_argument("--json-out", default="")
    a = ap.parse_args()
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    slow_s = a.short_s * a.factor
    common = [f"plugins=[{PLUGIN}]", "seed=0", "threads=2", "eval.before=false", "eval.after=false",
              "rl.checkpoint_every=0", "log.detect_every=0", "rl.prompts_per_step=8", "rl.group_size=8",
              "rl.optim.lr=1e-4", "rl.optim.warmup=0",
              # checks in flight at once: a remote service's capacity, not this machine's cores. The two
              # lanes share it: sized for both (8 samples x (8 short + long_concurrency) groups), or the long
              # lane's waiting checks hold the slots the short lane's need (with 64: steps of 0.8 s, not 0.3)
              f"sandbox.concurrency={8 * (8 + a.long_concurrency)}"]
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu}, load {os.getloadavg()[0]:.1f}; "
          f"checks {a.short_s} s, slow {slow_s} s for {a.slow_share:.0%} of tasks", flush=True)

    warm = out / "warm"  # one SFT warm-up (its checks all short), every arm starts from its model
    if not (warm / "sft-model" / "config.json").exists():
        posttrain(["rl", "examples/tiny_rl.yaml", *common, domain(0.0, 0.0, 0.0), "rl.steps=0",
                   "--out", str(warm), "--overwrite"], out / "warm.log")
    lt = ("rl.longtail.enabled=true", f"rl.longtail.long_factor={a.long_factor}",
          f"rl.longtail.long_concurrency={a.long_concurrency}")
    arms = {"short": (domain(a.short_s, slow_s, 0.0),),
            "mixed in one domain": (domain(a.short_s, slow_s, a.slow_share),),
            "mixed in one domain, longtail": (domain(a.short_s, slow_s, a.slow_share), *lt),
            "slow domain": (domain(a.short_s, slow_s, a.slow_share, own_domain=True),),
            "slow domain, longtail": (domain(a.short_s, slow_s, a.slow_share, own_domain=True), *lt)}
    res = {}
    for name, extra in arms.items():
        run = out / name.replace(", ", "-").replace(" ", "_")
        posttrain(["rl", "examples/tiny_rl.yaml", *common, *extra, f"model.path={warm / 'sft-model'}", "sft.steps=0",
                   f"rl.steps={a.steps}", "--out", str(run), "--overwrite"], run.with_suffix(".log"))
        res[name] = summarise(run)
        print(json.dumps({name: res[name]}), flush=True)
    base = res["short"]["step_median_s"]
    print("| arm | step median s | vs short | step mean s | step max s | groups trained | reward mean | "
          "long-tail accounting |\n|---|---:|---:|---:|---:|---:|---:|---|")
    for name, r in res.items():
        lt = r.get("longtail")
        acc = "-" if lt is None else (f"{lt['submitted']} submitted = {lt['trained']} delivered ({lt['late']} late) "
                                      f"+ {lt['stale_dropped']} stale + {lt['failed']} failed + "
                                      f"{lt['in_flight_at_end']} in flight at the end: "
                                      f"{'accounted' if lt['accounted'] else 'NOT accounted'}")
        print(f"| {name} | {r['step_median_s']:.2f} | {r['step_median_s'] / base:.2f}x | {r['step_mean_s']:.2f} | "
              f"{r['step_max_s']:.2f} | {r['groups_trained']} | {r['reward_mean']:.3f} | {acc} |")
    doc = {"args": vars(a), "arms": res, "vs_short": {k: r["step_median_s"] / base for k, r in res.items()}}
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
