"""Pair the held-out results of two `vs_trl_smollm2.py` output directories, seed by seed, without training again.

    .venv/bin/python benchmarks/heldout_pairs.py runs/vs-trl-sampler-fix:posttrain runs/vs-trl-smollm2-bf16-mem:trl \
        [--seeds 0 1 2]

Each argument is DIR:SIDE; the side's held-out evals are DIR/eval_SIDE-sSEED (`posttrain eval`'s samples.jsonl,
greedy, on DIR/heldout.jsonl). Both directories must hold the same held-out tasks. Prints, per seed, both pass@1,
the difference and the exact McNemar p on the same items, then the paired t-test across seeds and its 95%
interval: the held-out comparison of `vs_trl_smollm2.py`, for a side rerun alone (TRL's runs are deterministic per
seed, so a rerun of ours can be paired with an earlier session's TRL). Step times and memory are not compared:
those need both sides in one session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gemma3_rl import t_interval  # noqa: E402
from vs_trl_smollm2 import mcnemar, read_scores  # noqa: E402


def side(arg: str) -> tuple[Path, str]:
    if ":" not in arg:
        raise SystemExit(f"{arg!r}: expected DIR:SIDE, e.g. runs/vs-trl-smollm2-bf16-mem:trl")
    d, s = arg.rsplit(":", 1)
    if not (Path(d) / "heldout.jsonl").is_file():
        raise SystemExit(f"{d}: no heldout.jsonl (not a vs_trl_smollm2.py output directory)")
    return Path(d), s


def scores(d: Path, s: str, seed: int) -> list[int]:
    got = read_scores({"heldout": d / "heldout.jsonl"}, d / f"eval_{s}-s{seed}")
    if got is None:
        raise SystemExit(f"{d / f'eval_{s}-s{seed}'}: no complete held-out eval there")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="DIR:SIDE, the side whose pass@1 comes first in the differences")
    ap.add_argument("b", help="DIR:SIDE")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    (da, sa), (db, sb) = side(args.a), side(args.b)
    if (da / "heldout.jsonl").read_text() != (db / "heldout.jsonl").read_text():
        raise SystemExit(f"{da} and {db} hold different held-out tasks: nothing to pair")
    print(f"| seed | {sa} ({da.name}) | {sb} ({db.name}) | difference | McNemar p ({sa} only / {sb} only) |")
    print("|---:|---:|---:|---:|---|")
    diffs, pa, pb = [], [], []
    for seed in args.seeds:
        a, b = scores(da, sa, seed), scores(db, sb, seed)
        m = mcnemar(a, b)
        pa.append(sum(a) / len(a))
        pb.append(sum(b) / len(b))
        diffs.append(pa[-1] - pb[-1])
        print(f"| {seed} | {pa[-1]:.3f} | {pb[-1]:.3f} | {diffs[-1]:+.3f} | {m['p']:.2g} ({m['a_only']} / {m['b_only']}) |")
    out = {"diff_mean": round(statistics.mean(diffs), 4), "diff_ci95": t_interval(diffs)}
    if len(diffs) >= 2:
        from scipy.stats import ttest_rel

        t = ttest_rel(pa, pb)
        out["paired_t_p"] = None if t.pvalue != t.pvalue else round(float(t.pvalue), 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
