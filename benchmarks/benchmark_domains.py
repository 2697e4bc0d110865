"""The real benchmark domains (math500, aime, ifbench): task counts, skips, agreement, verification speed.

    .venv/bin/python benchmarks/benchmark_domains.py [--reps 3]

Prints one JSON object:
- `counts`: tasks per domain and split (train = seeds < 10_000, heldout = seeds >= 10_000),
  tasks with an oracle, ifbench's skipped prompts (missing NLTK data, content-free) and
  how many supported prompts the package's checker passes for each content-free answer;
- `agreement`: ifbench, our strict / loose verdicts vs the package's `evaluation_lib` on
  every supported prompt's sample response (constraint level and prompt level);
- `speed`: seconds per 100 answers through each verifier's blocking `judge`, after a warm-up
  (math_verify: 100 oracle + 100 wrong answers alternated; ifbench: the sample responses),
  best of `--reps` runs. Single runs on a shared 2-core machine: rerun to see the spread.
Needs the `benchmarks` extra (nvidia-mmath, math-verify, nvidia-ifbench, nltk, ...).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.registry import build  # noqa: E402
from posttrain.tasks.mmath import EVAL_SEED  # noqa: E402


def counts() -> dict:
    out = {}
    for name in ("math500", "aime", "ifbench"):
        dom = build(name, kind="domain")
        row = {}
        for split, seed in (("train", 0), ("heldout", EVAL_SEED)):
            tasks = dom.generate(10_000, seed)
            row[split] = len(tasks)
            row[f"{split}_with_oracle"] = sum(t.oracle is not None for t in tasks)
        if name == "ifbench":
            row["skipped"] = dom.skipped()
            row["content_free_accepted"] = content_free_hits()
        out[name] = row
    return out


def content_free_hits() -> dict:
    """Supported prompts whose constraints the package's checker accepts for each content-free answer."""
    from posttrain.tasks.ifbench import CONTENT_FREE, load_prompts, package_strict
    from posttrain.verifiers.ifbench import missing_data

    names = ("refusal", "yes", "filler", "numbers", "placeholder_list", "prompt_echo")
    rows = [r for r in load_prompts() if not missing_data(r["instruction_id_list"])]
    out = {n: 0 for n in names}
    for r in rows:
        for n, text in zip(names, CONTENT_FREE + (r["prompt"],)):
            out[n] += package_strict(r, text)
    return {"of_supported": len(rows), **out}


def agreement() -> dict:
    import ifbench.evaluation_lib as lib

    from posttrain.tasks.ifbench import load_prompts, sample_responses
    from posttrain.verifiers.ifbench import check_constraints, missing_data

    out = {}
    rows = [r for r in load_prompts() if not missing_data(r["instruction_id_list"])]
    for mode, fn in (("strict", lib.test_instruction_following_strict), ("loose", lib.test_instruction_following_loose)):
        same_c = total_c = same_p = passed = 0
        for r in rows:
            resp = sample_responses()[r["prompt"]]
            kw = [{k: v for k, v in d.items() if v is not None} for d in r["kwargs"]]
            theirs = fn(lib.InputExample(r["key"], r["instruction_id_list"], r["prompt"], copy.deepcopy(kw)),
                        {r["prompt"]: resp}).follow_instruction_list
            ours = [m for m, _ in check_constraints(r["prompt"], r["instruction_id_list"], r["kwargs"], resp, mode)]
            same_c += sum(a == b for a, b in zip(ours, theirs))
            total_c += len(theirs)
            same_p += ours == theirs
            passed += all(theirs)
        out[mode] = {"prompts": len(rows), "prompt_agreement": same_p / len(rows), "constraint_agreement": same_c / total_c,
                     "package_prompt_pass_rate": passed / len(rows)}
    return out


def _per_100(fn, items: list, reps: int) -> float:
    fn(items[0])  # warm-up: starts the worker / imports the checker
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for x in items:
            fn(x)
        best = min(best, time.perf_counter() - t0)
    return best * 100 / len(items)


def speed(reps: int) -> dict:
    out = {}
    for name in ("math500", "aime"):
        dom = build(name, kind="domain", split="all")
        tasks = dom.generate(100, 0)
        pairs = []
        for i, t in enumerate(tasks):
            v = build(t.verifier, kind="verifier")
            pairs.append((v, t.oracle if i % 2 == 0 else dom.wrong_answer(t, random.Random(i))))
        out[f"{name}_math_verify_s_per_100"] = round(_per_100(lambda p: p[0].judge(p[1]), pairs, reps), 3)
    from posttrain.tasks.ifbench import load_prompts, sample_responses

    dom = build("ifbench", kind="domain", split="all")
    tasks = dom.generate(10_000, 0)[:100]
    by_key = {r["key"]: r for r in load_prompts()}
    pairs = [(build(t.verifier, kind="verifier"), sample_responses()[by_key[t.metadata["key"]]["prompt"]]) for t in tasks]
    out["ifbench_s_per_100"] = round(_per_100(lambda p: p[0].judge(p[1]), pairs, reps), 3)
    out["ifbench_answers"] = len(pairs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps({"counts": counts(), "agreement": agreement(), "speed": speed(args.reps)}, indent=1))


if __name__ == "__main__":
    main()
