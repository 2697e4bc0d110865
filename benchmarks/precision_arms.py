"""posttrain's RL in fp32 against bf16 (rollouts and update), seed by seed on the same machine.

    .venv/bin/python benchmarks/precision_arms.py [--seeds 0 1 2] [--steps 30] [--reuse]

The task, model, LoRA, batches and held-out suite are vs_trl_smollm2.py's (SmolLM2-135M-Instruct,
unit conversion at the model's edge, 30 steps of 8 x 8), posttrain's side only. Two arms:
  fp32   the defaults: fp32 rollouts, the engine's logprobs, an fp32 update
  bf16   "engine={name: fast, args: {matmul_dtype: auto}}" rl.old_logprobs=recompute: bf16 weight
         matmuls in the rollouts where this machine measures them faster, and under
         trainer.precision auto the update under bf16 autocast too (train/lora.resolve_precision)
  bf16_tis  the same with rl.rollout_correction=true: each token weighted by the truncated IS
         ratio of the trainer's recomputed logprobs to the engine's (the mismatch correction)
For each seed the arms (`--arms`, fp32 first) run back to back, so a drift of the machine's speed
hits them alike. Reported per seed and arm against fp32: the step time ratio (mean and median step, and
the generation and update medians), held-out pass@1 of each final model on the same items,
their McNemar test, and across seeds the paired t-test of pass@1. `--reuse` keeps an arm's
run whose results file is already there (to add seeds, or to summarise again).
Writes benchmarks/results/precision_arms.json (`--results` to change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from vs_trl_smollm2 import machine_name, mcnemar  # noqa: E402  (lscpu's name; the exact McNemar p)

BF16 = ["engine={name: fast, args: {matmul_dtype: auto}}", "rl.old_logprobs=recompute"]
ARMS = {"fp32": [], "bf16": BF16, "bf16_tis": [*BF16, "rl.rollout_correction=true"]}


def run_arm(a: argparse.Namespace, arm: str, seed: int) -> dict:
    """The arm's vs_trl_smollm2.py run for `seed` (posttrain side), its summary row and per-item passes."""
    out, res = Path(a.out) / f"{arm}-s{seed}", Path(a.out) / f"{arm}-s{seed}.json"
    if not (a.reuse and res.exists()):
        cmd = [sys.executable, str(ROOT / "benchmarks/vs_trl_smollm2.py"), "--steps", str(a.steps), "--seeds",
               str(seed), "--sides", "posttrain", "--model", a.model, "--out", str(out), "--results", str(res),
               *ARMS[arm]]
        print(f"[{arm} s{seed}] {' '.join(cmd[1:])}", flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    (row,) = json.loads(res.read_text())["runs"]
    rows = [json.loads(line) for line in (out / f"eval_posttrain-s{seed}" / "samples.jsonl").open()]
    row["heldout"] = [int(r["passed"]) for r in sorted(rows, key=lambda r: r["task_id"])]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--model", default="models/smollm2")
    ap.add_argument("--out", default="runs/precision-arms")
    ap.add_argument("--arms", nargs="+", default=["fp32", "bf16"], choices=sorted(ARMS))
    ap.add_argument("--reuse", action="store_true", help="keep an arm's run whose results file exists")
    ap.add_argument("--results", default=str(ROOT / "benchmarks/results/precision_arms.json"))
    a = ap.parse_args()
    arms = ["fp32", *[x for x in a.arms if x != "fp32"]]
    per = {(arm, s): run_arm(a, arm, s) for s in a.seeds for arm in arms}
    doc = {"config": vars(a), "arms": {k: ARMS[k] for k in arms}, "machine": machine_name()}
    for arm in arms[1:]:
        rows = []
        for s in a.seeds:
            f, b = per["fp32", s], per[arm, s]
            rows.append({
                "seed": s, "mean_step_ratio": round(b["mean_step_s"] / f["mean_step_s"], 3),
                **{f"median_{k}_ratio": round(b["median_s"][k] / f["median_s"][k], 3)
                   for k in ("step", "generate", "update")},
                "mean_step_s": [f["mean_step_s"], b["mean_step_s"]],
                "median_step_s": [f["median_s"]["step"], b["median_s"]["step"]],
                "pass@1": [f["pass@1"], b["pass@1"]], "peak_pss_gib": [f["peak_pss_gib"], b["peak_pss_gib"]],
                f"mcnemar_{arm}_vs_fp32": mcnemar(b["heldout"], f["heldout"])})
            print(json.dumps({"arm": arm, **rows[-1]}), flush=True)
        diffs = [x["pass@1"][1] - x["pass@1"][0] for x in rows]
        summary = {"per_seed": [round(d, 4) for d in diffs], "mean": round(statistics.mean(diffs), 4)}
        if len(rows) >= 2:
            from scipy.stats import ttest_rel

            t = ttest_rel([x["pass@1"][1] for x in rows], [x["pass@1"][0] for x in rows])
            summary["paired_t_p"] = None if t.pvalue != t.pvalue else round(float(t.pvalue), 4)
        print(json.dumps({"arm": arm, f"pass_diff_{arm}_minus_fp32": summary}), flush=True)
        doc[arm] = {"seeds": rows, f"pass_diff_{arm}_minus_fp32": summary}
    Path(a.results).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
