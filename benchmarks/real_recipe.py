"""The real-model recipe on SmolLM2-135M-Instruct: what the base can do, RL lift, and the scheduler.

    .venv/bin/python benchmarks/real_recipe.py probe --n 20 --group 4 --max-new 256
    .venv/bin/python benchmarks/real_recipe.py recipe --steps 40          # the preset, via run_quickstart
    .venv/bin/python benchmarks/real_recipe.py scheduler --budget-s 600   # uniform vs learning_signal

`probe` measures, per real domain, on the base model (no training): greedy pass@1 on `--n`
held-out tasks with a 95% Wilson interval, and on `--n` train tasks `--group` samples at
T=1: mean reward, the fraction of groups whose rewards all agree (zero variance: no GRPO
signal), the fraction cut at the token budget, and mean completion length. It is how the
preset's domains were chosen: RL needs headroom and nonzero group variance.

`recipe` runs `presets/smollm2.yaml` through `run_quickstart` (the code `posttrain quickstart
--model smollm2-135m-instruct` runs), with the given overrides, and prints the summary plus
peak RSS. `scheduler` runs the same recipe on a mixture of real domains twice, once per
schedule policy, each RL phase stopped at the same wall-time budget, and reports the
held-out gain and zero-variance group fraction of each.

Model: `--model DIR` (default $POSTTRAIN_SMOLLM2 or models/smollm2), made by
`posttrain models get smollm2-135m-instruct --out DIR`. Every phase prints one JSON line.
Limit: on a loaded machine the times are upper bounds; the pass rates do not depend on load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_MODEL = os.environ.get("POSTTRAIN_SMOLLM2", "models/smollm2")
REAL_DOMAINS = ("bfcl", "ifbench", "math500", "aime", "humaneval")
TRAIN_CAP = {"math500": 145, "aime": 20, "ifbench": 63, "humaneval": 80}  # train-split sizes (docs/benchmarks.md)


def peak_rss_mib() -> float:
    """Peak resident set of this process and its waited-for children (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def load_mean() -> float:
    return os.getloadavg()[0]


async def probe_domain(name: str, engine, tok, runner, n: int, group: int, max_new: int, seed: int,
                       args: dict | None = None) -> dict:
    from posttrain.eval.heldout import evaluate_heldout
    from posttrain.eval.stats import wilson
    from posttrain.registry import build
    from posttrain.rollout.engine import SamplingParams
    from posttrain.rollout.single_turn import rollout_single_turn
    from posttrain.tasks.base import generate_split

    args = dict(args or {})
    max_new = int(args.pop("max_new_tokens", max_new))
    dom = build(name, kind="domain", **({} if name == "humaneval" else {"max_new_tokens": max_new}), **args)
    t0 = time.perf_counter()
    held = generate_split(dom, n, 10_000, 1.0)
    res = await evaluate_heldout(engine, tok, held, runner, max_new_tokens=max_new)
    k, m = sum(res.passed.values()), len(res.passed)
    train = generate_split(dom, n, seed, 1.0)
    params = SamplingParams(temperature=1.0, max_new_tokens=max_new, n=group, seed=seed)
    trajs = await runner.verify_all({t.id: t for t in train},
                                    await rollout_single_turn(engine, tok, train, params))
    groups: dict[str, list[float]] = {}
    for t in trajs:
        if not t.infra_error:
            groups.setdefault(t.task_id, []).append(float(t.verify.score if t.verify else 0.0))
    rewards = [r for g in groups.values() for r in g]
    lo, hi = wilson(k, m)
    return {"domain": name, **({"args": args} if args else {}), "max_new_tokens": max_new, "heldout_n": m,
            "pass@1": k / m if m else float("nan"), "ci95": [lo, hi],
            "infra_errors": res.infra_errors, "train_groups": len(groups), "group": group,
            "mean_reward": sum(rewards) / max(1, len(rewards)),
            "zero_variance_frac": sum(len(set(g)) == 1 for g in groups.values()) / max(1, len(groups)),
            "cut_at_budget_frac": sum(t.finish_reason == "length" for t in trajs) / max(1, len(trajs)),
            "mean_completion_tokens": sum(len(t.turns[0].token_ids) for t in trajs) / max(1, len(trajs)),
            "wall_s": round(time.perf_counter() - t0, 1), "load": round(load_mean(), 1)}


async def probe(a: argparse.Namespace) -> None:
    import torch

    from posttrain.models import load_policy
    from posttrain.rollout import make_engine
    from posttrain.sandbox import default_sandbox
    from posttrain.verifiers.run import VerifierRunner

    torch.set_num_threads(a.threads)
    model, tok = load_policy(a.model)
    engine = make_engine(a.engine, model, tok)
    runner = VerifierRunner(default_sandbox(), concurrency=2)
    for name in a.domains.split(","):
        args = {"categories": a.bfcl_categories, "max_new_tokens": a.bfcl_max_new} if name == "bfcl" else {}
        row = await probe_domain(name, engine, tok, runner, a.n, a.group, a.max_new, a.seed, args)
        print(json.dumps(row), flush=True)
    print(json.dumps({"peak_rss_mib": round(peak_rss_mib())}), flush=True)


def recipe_config(model: str, overrides: list[str], policy: str | None = None):
    """The smollm2 preset with `model.path` set and `overrides` applied (what quickstart --model builds)."""
    from posttrain.recipes.quickstart import model_preset_config

    extra = [f"schedule.name={policy}"] if policy else []
    return model_preset_config("smollm2-135m-instruct", model, [*overrides, *extra])


def run_recipe(model: str, overrides: list[str], out: Path, policy: str | None = None,
               budget_s: float | None = None) -> dict:
    from posttrain.config_check import check_config
    from posttrain.recipes.quickstart import run_quickstart
    from posttrain.store.run_dir import claim_run_dir

    cfg = recipe_config(model, overrides, policy)
    check_config(cfg)
    claim_run_dir(out, overwrite=True, command="benchmarks/real_recipe.py")
    t0 = time.perf_counter()
    s = run_quickstart(cfg, out, rl_budget_s=budget_s)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (out / "metrics.jsonl").is_file() else []
    zv = [r["groups/dropped_frac"] for r in rows if "groups/dropped_frac" in r]
    return {"policy": cfg.schedule.name, "before": s["before"], "after": s["after"], "p_value": s["p_value"],
            "domain_p_values": s["domain_p_values"], "flips": s["flips"], "n_tasks": s["n_tasks"],
            "rl_steps": len([r for r in rows if "step" in r]), "zero_variance_frac": sum(zv) / len(zv) if zv else None,
            "wall_s": round(time.perf_counter() - t0, 1), "peak_rss_mib": round(peak_rss_mib()),
            "load": round(load_mean(), 1)}


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--domains", default=",".join(REAL_DOMAINS))
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new", type=int, default=256)
    p.add_argument("--engine", default="fast")
    # BFCL's multi-function and live categories have 700-2800-token prompts; these three ~400
    p.add_argument("--bfcl-categories", default="simple,live_simple,irrelevance")
    p.add_argument("--bfcl-max-new", type=int, default=128)  # a simple call's oracle is ~45 tokens
    p.add_argument("--seed", type=int, default=0)
    for q in (p, sub.add_parser("recipe"), sub.add_parser("scheduler")):
        q.add_argument("--model", default=DEFAULT_MODEL)
        q.add_argument("--threads", type=int, default=2)
        q.add_argument("--out", type=Path, default=ROOT / "runs" / "real_recipe")
        q.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. rl.steps=20")
    sub.choices["scheduler"].add_argument("--budget-s", type=float, default=600.0)
    sub.choices["scheduler"].add_argument("--domains", default="bfcl,ifbench,math500")
    sub.choices["scheduler"].add_argument("--n-eval", type=int, default=60)
    sub.choices["scheduler"].add_argument("--max-new", type=int, default=192)
    a = ap.parse_args()
    if a.cmd == "probe":
        asyncio.run(probe(a))
    elif a.cmd == "recipe":
        print(json.dumps(run_recipe(a.model, [f"threads={a.threads}", *a.overrides], a.out)), flush=True)
    else:
        mix = [o for d in a.domains.split(",") for o in (f"tasks.domains.{d}.weight=1.0",
               f"tasks.domains.{d}.n_eval={a.n_eval}", f"tasks.domains.{d}.n_train={TRAIN_CAP.get(d, 400)}")]
        mix += [f"tasks.domains.{d}.args.max_new_tokens={a.max_new}" for d in a.domains.split(",") if d != "humaneval"]
        for policy in ("uniform", "learning_signal"):
            row = run_recipe(a.model, [f"threads={a.threads}", *mix, *a.overrides], a.out / policy, policy,
                             a.budget_s)
            print(json.dumps({"budget_s": a.budget_s, **row}), flush=True)


if __name__ == "__main__":
    main()
