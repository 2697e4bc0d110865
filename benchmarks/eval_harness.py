"""Evaluation harness speed: the default regression suite, 5 epochs, tiny model, 2 cores.

    .venv/bin/python benchmarks/eval_harness.py [--repeats 3]

Runs the real CLI (`posttrain eval --suite regression --epochs 5`) as a subprocess, cold
(no generation cache), then warm (same cache, new --out: generation skipped), then a
resume of a finished run (nothing to do). Each row is the median over repeats of:
process wall time, and from summary.json the split of the evaluation's own wall time into
engine startup (torch/transformers import + weights), generation, verification and
harness overhead (wall - startup - union of generation and verification intervals).
Ratios are to the same run's wall time, so machine load mostly cancels out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "posttrain.cli.main"]


def tiny_model(d: Path) -> Path:
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    return save_policy(*build_tiny(), d / "tiny")


def run_eval(model: Path, out: Path, cache: Path | None) -> dict:
    cmd = CLI + ["eval", "--model", str(model), "--suite", "regression", "--epochs", "5", "--out", str(out), "--json"]
    cmd += ["--cache", str(cache)] if cache else ["--no-cache"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"eval failed: {res.stderr[-2000:]}")
    summary = json.loads(res.stdout)["summary"]
    return {"process_s": wall, **summary["timing"], "samples": summary["overall"]["samples"],
            "new": summary["run"]["samples_new"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {"cold (no cache)": [], "warm cache, new --out": [], "resume finished run": []}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        model = tiny_model(d)
        for r in range(args.repeats):
            cache = d / f"cache{r}.sqlite"
            rows["cold (no cache)"].append(run_eval(model, d / f"cold{r}", None))
            run_eval(model, d / f"fill{r}", cache)  # fills the cache
            rows["warm cache, new --out"].append(run_eval(model, d / f"warm{r}", cache))
            rows["resume finished run"].append(run_eval(model, d / f"cold{r}", None))
    med = lambda rs, k: statistics.median(x[k] for x in rs)  # noqa: E731
    ratio = lambda rs, f: statistics.median(f(x) for x in rs)  # noqa: E731  per-run ratio, then median
    print(f"regression suite x5 epochs, tiny model, median of {args.repeats}; ratios are per run, then median")
    print(f"{'run':24} {'samples':>7} {'new':>5} {'process s':>9} {'eval wall s':>11} {'startup/wall':>12} "
          f"{'gen/wall':>8} {'verify/wall':>11} {'harness/wall':>12} {'harness/(wall-startup)':>22}")
    for name, rs in rows.items():
        print(f"{name:24} {med(rs, 'samples'):>7} {med(rs, 'new'):>5} {med(rs, 'process_s'):>9.2f} "
              f"{med(rs, 'wall_s'):>11.2f} {ratio(rs, lambda x: x['engine_startup_s'] / x['wall_s']):>12.1%} "
              f"{ratio(rs, lambda x: x['generation_s'] / x['wall_s']):>8.1%} "
              f"{ratio(rs, lambda x: x['verification_s'] / x['wall_s']):>11.1%} "
              f"{ratio(rs, lambda x: x['harness_frac']):>12.1%} "
              f"{ratio(rs, lambda x: x['harness_s'] / max(1e-9, x['wall_s'] - x['engine_startup_s'])):>22.1%}")
    cold, warm = med(rows["cold (no cache)"], "process_s"), med(rows["warm cache, new --out"], "process_s")
    print(f"warm/cold process time: {warm / cold:.2f}")


if __name__ == "__main__":
    main()
