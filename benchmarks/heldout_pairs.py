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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vs_trl_smollm2 import paired_heldout, read_scores  # noqa: E402


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
    p = paired_heldout({s: scores(da, sa, s) for s in args.seeds}, {s: scores(db, sb, s) for s in args.seeds})
    for i, seed in enumerate(p["seeds"]):
        m = p["mcnemar"][seed]
        print(f"| {seed} | {p['pass_a'][i]:.3f} | {p['pass_b'][i]:.3f} | {p['pass_diff'][i]:+.3f} | {m['p']:.2g} "
              f"({m['a_only']} / {m['b_only']}) |")
    print(json.dumps({"diff_mean": p["pass_diff_mean"], "diff_ci95": p["pass_diff_ci95"],
                      **({"paired_t_p": p["paired_t_p"]} if "paired_t_p" in p else {})}))


if __name__ == "__main__":
    main()
