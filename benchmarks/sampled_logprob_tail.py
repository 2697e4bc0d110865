"""How often an RL run sampled a token its own policy gave almost no probability: a sampler check on real runs.

    .venv/bin/python benchmarks/sampled_logprob_tail.py RUN_DIR [RUN_DIR ...] [--below -12]

Reads each run's trajectories.sqlite (the engine's logprob of every sampled completion token, at
temperature 1) and prints, per run, the tokens sampled, the fraction with logprob < --below, and the
fraction of completions holding at least one. At temperature 1 a token of logprob -12 is drawn 6e-6 of the
time, so a sampler that draws from softmax leaves few such tokens; the fast engine's sampler before
2026-12-07 drew a column picked by its hash, whatever its logit, in vocab / 2^24 of draws (0.29% at
SmolLM2's 49,152 tokens, 1.6% at Gemma 3's 262,144), and those tokens sit here. Runs made with
temperature != 1 are not comparable (the logprobs are of the raw logits).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from posttrain.store.run import RunDir


def tail(run: Path, below: float) -> dict:
    tokens = low = comps = comps_low = 0
    with RunDir(run).queries() as q:
        for traj in q.trajectories(kind="train"):
            hit = False
            for turn in traj.turns:
                if turn.trainable:
                    tokens += len(turn.logprobs)
                    n = sum(lp < below for lp in turn.logprobs)
                    low += n
                    hit = hit or n > 0
            comps += 1
            comps_low += hit
    return {"run": str(run), "tokens": tokens, "below": below, "low_frac": low / max(1, tokens),
            "completions": comps, "completions_with_one": comps_low / max(1, comps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--below", type=float, default=-12.0)
    a = ap.parse_args()
    for rd in map(RunDir, a.runs):
        if not rd.has_trajectories():
            raise SystemExit(f"{rd.path}: no {rd.trajectories.name} (not a posttrain run directory)")
    print("| run | tokens | logprob < %g | completions with one |" % a.below)
    print("|---|---:|---:|---:|")
    for run in a.runs:
        r = tail(run, a.below)
        print(f"| {run} | {r['tokens']:,} | {r['low_frac']:.3%} | {r['completions_with_one']:.1%} |")


if __name__ == "__main__":
    main()
