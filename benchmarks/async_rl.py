"""Asynchronous RL: K = 0 (synchronous) vs K = 1 vs K = 2, side by side in one process.

    .venv/bin/python benchmarks/async_rl.py [--steps 12] [--domains tools,code] [--ks 0,1,2]
                                            [--json benchmarks/results/async_rl.json]

Per domain, one warm-up (SFT) model is trained once; each K then runs the real RL loop
(train/rl.py -> train/async_rl/ for K >= 1) from a copy of it for the same number of steps, so
every side trains on the same number of samples (steps x prompts x group). Reported per side:
wall time of the RL loop, speedup vs K = 0, the per-phase seconds summed over steps (generate,
verify, update, sync: the producer's phases and the trainer's; medians over --repeats
interleaved runs per K, as the host's load drifts), consumer idle (trainer waiting
for a batch) and producer idle (waiting for weights or an issued batch), and held-out pass@1
after RL (every repeat's, and their mean) with an exact McNemar test paired by task against the
K = 0 run of the same repeat, pooled over the repeats. Repeat r uses RL seed + r (the warm-up is
shared), so the repeats are independent RL runs.

`--ks 0,0h,0l,1,2`: `0l` is K = 0 at half the learning rate (the lr rl.stale_lr=inverse gives the
K = 1 side), which separates the step size from the staleness. `0h` is K = 0 with half the torch threads, the thread count each side of
the asynchronous loop gets (train/async_rl/source.py), which separates the overlap from the
thread count. `1p`, `2p`: K = 1 or 2 with rl.partial_rollouts (the engine takes the trainer's
new weights between decode steps of a batch in flight, docs/async_rl.md).

Domains: `tools` (calculator agent episodes, rollout/agent/tasks.py; by default the agent recipe's
warm-up, recipes/agent.py `warm_up`, which leaves a policy RL can lift: a plain plan-SFT past the
copy skill solves every held-out task, and RL from there only loses) and `code` (programs run in
the process sandbox, a sandbox-heavy verifier; oracle SFT).
The per-phase costs of the K = 0 runs feed benchmarks/async_sim.py (--json).

What bounds the gain on this machine: the trainer and the producer share 2 cores, and both
generation and the update are torch on those cores, so only time that is not torch compute on
the critical path (sandbox subprocesses, Python) can overlap; a step can be at most
max(rollout, update) instead of their sum.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path

PHASES = ("time/generate_s", "time/verify_s", "time/update_s", "time/sync_s", "time/consumer_idle_s",
          "time/producer_idle_s")


def _warm(model, path, train_fn):
    """Run the warm-up `train_fn(model)`, or load its weights from `path` when a previous run left them."""
    import torch

    if path is not None and path.is_file():
        model.load_state_dict(torch.load(path))
        return
    train_fn(model)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), path)


def _code_setup(args, cache):
    from posttrain.config import SFTConfig, load_config
    from posttrain.models.tiny import build_tiny
    from posttrain.sandbox import default_sandbox
    from posttrain.tasks.splits import make_splits
    from posttrain.train.sft import sft_train

    ov = ["seed=0", "threads=2", f"tasks.domains={{code: {{n_train: 600, n_eval: {args.n_eval}, difficulty: 0.6}}}}",
          "rl.prompts_per_step=8", "rl.group_size=8", "rl.max_new_tokens=24", "rl.lr=1e-4", "rl.warmup_steps=2",
          "rl.checkpoint_every=0", "engine.name=fast"]
    cfg = load_config(None, ov)
    splits = make_splits(cfg)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    _warm(model, cache and cache / f"code-sft{args.sft_steps}.pt", lambda m: sft_train(
        m, tok, [(t.prompt, t.oracle) for t in splits.sft], SFTConfig(steps=args.sft_steps, batch_size=32, lr=3e-3)))
    return ov, model, tok, splits.rl, splits.held_out, default_sandbox()


def _tools_setup(args, cache):
    from posttrain.models.tiny import build_tiny
    from posttrain.config_recipe import recipe_settings
    from posttrain.recipes.agent import agent_config, warm_up
    from posttrain.rollout.agent.sft import plan_demonstrations
    from posttrain.rollout.agent.tasks import product_tasks
    from posttrain.train.agent_sft import sft_on_demonstrations

    ov = ["seed=1", "threads=2", f"rl.prompts_per_step={args.tools_prompts}", f"rl.group_size={args.tools_group}",
          "rl.warmup_steps=2", "rl.checkpoint_every=0"]
    cfg = agent_config(None, ov)
    model, tok = build_tiny(cfg.model.tiny, seed=cfg.seed)
    train = product_tasks(recipe_settings(cfg, "agent").n_train if args.tools_warmup == "recipe" else 400, cfg.seed, task_table=True)
    held = product_tasks(args.n_eval, 10_000 + cfg.seed, exclude={t.prompt[-1].content for t in train}, task_table=True)
    if args.tools_warmup == "recipe":  # the agent recipe's: copy skill to a measured level, then a base model's habits
        _warm(model, cache and cache / "tools-recipe.pt", lambda m: asyncio.run(warm_up(m, tok, train, cfg, lambda s: None)))
    else:  # a fixed number of plan-demonstration steps
        _warm(model, cache and cache / f"tools-sft{args.sft_steps}.pt", lambda m: sft_on_demonstrations(
            m, tok, asyncio.run(plan_demonstrations(tok, train)), steps=args.sft_steps, optim=cfg.sft.optim, batch_size=32,
            seed=cfg.seed))
    return ov, model, tok, train, held, None


def run_side(domain, k, ov, model, tok, train, held, sandbox, steps, repeat=0, eval_every=0, stale_lr=None):
    """One RL run of side `k` from the warm-up; repeat r trains with RL seed (the config's) + r, so
    the repeats are independent RL runs (with pinned staleness a run is deterministic in its seed)."""
    from posttrain.config import load_config
    from posttrain.recipes.presets import load_preset
    from posttrain.train.rl import build_state, run_eval, train_rl

    import torch

    base = load_preset("agent") if domain == "tools" else None
    halved = k == "0h"  # K = 0 with the torch threads the async loop gives each side (half)
    partial = str(k).endswith("p")  # rl.partial_rollouts: new weights taken mid-batch
    kk = 0 if k in ("0h", "0l") else int(str(k).rstrip("p"))
    seed = int(next(o for o in ov if o.startswith("seed=")).split("=")[1]) + repeat
    cfg = load_config(None, [*ov, f"seed={seed}", f"rl.steps={steps}", f"rl.max_staleness={kk}",
                             f"rl.partial_rollouts={str(partial).lower()}", f"rl.eval_every={eval_every}"],
                      base=base)
    if k == "0l":  # the synchronous loop at the lr rl.stale_lr=inverse gives K = 1: is it the lr alone?
        cfg.rl.optim.lr *= 0.5
    if stale_lr is not None:  # --stale-lr: the K >= 1 sides' staleness-aware step size rule
        cfg.rl.stale_lr = stale_lr
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as d:
        st = build_state(cfg, Path(d), copy.deepcopy(model), tok, train, held, sandbox)
        start = [(0, asyncio.run(run_eval(st)).mean_over_domains())] if eval_every else []  # the warm-up's score
        torch.set_num_threads(max(1, threads // 2) if halved else threads)
        t0 = time.perf_counter()
        asyncio.run(train_rl(st))
        wall = time.perf_counter() - t0
        torch.set_num_threads(threads)
        res = asyncio.run(run_eval(st))
        rows = st.metrics.read()
        st.metrics.close(), st.store.close()
    phases = {p.split("/")[1]: sum(r.get(p, 0.0) for r in rows) for p in PHASES}
    curve = start + [(i + 1, r["eval/pass@1"]) for i, r in enumerate(rows) if "eval/pass@1" in r]  # held-out during RL
    return {"domain": domain, "k": k, "seed": seed, "wall_s": wall, "steps": len(rows), "curve": curve,
            "samples": len(rows) * cfg.rl.prompts_per_step * cfg.rl.group_size, "phases": phases,
            "pass@1": res.mean_over_domains(), "passed": res.passed,
            "staleness_max": max((r.get("async/staleness", 0) for r in rows), default=0),
            "inflight_updates": sum(r.get("async/inflight_updates", 0) for r in rows),
            "partial_frac_mean": sum(r.get("async/partial_frac", 0.0) for r in rows) / max(1, len(rows)),
            "offpolicy_kl_mean": sum(r.get("train/offpolicy/kl", 0.0) for r in rows) / max(1, len(rows)),
            "reward_mean": sum(r["reward/mean"] for r in rows) / max(1, len(rows)),
            "prompts_per_step": cfg.rl.prompts_per_step,
            "per_step": [{"rollout_s": r["time/generate_s"] + r["time/verify_s"],
                          "train_s": r["time/update_s"] + r["time/sync_s"]} for r in rows]}


def mcnemar_exact(b, c):
    from posttrain.eval.stats import mcnemar_exact as exact

    return exact(b, c)


def paired(base, other):
    common = [t for t in base["passed"] if t in other["passed"]]
    b = sum(base["passed"][t] and not other["passed"][t] for t in common)
    c = sum(other["passed"][t] and not base["passed"][t] for t in common)
    return {"fell": b, "rose": c, "p": mcnemar_exact(b, c), "n": len(common)}


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--domains", default="tools,code")
    ap.add_argument("--ks", default="0,1,2")
    ap.add_argument("--sft-steps", type=int, default=150, help="code's warm-up; tools' with --tools-warmup steps")
    ap.add_argument("--tools-warmup", choices=("recipe", "steps"), default="recipe",
                    help="recipe: the agent recipe's warm-up (a policy RL can lift); steps: --sft-steps plan SFT")
    ap.add_argument("--tools-prompts", type=int, default=8)
    ap.add_argument("--tools-group", type=int, default=4)
    ap.add_argument("--n-eval", type=int, default=60)
    ap.add_argument("--json", default="benchmarks/results/async_rl.json")
    ap.add_argument("--repeats", type=int, default=2, help="runs per K, interleaved; the median wall is reported")
    ap.add_argument("--eval-every", type=int, default=0, help="held-out pass@1 every N RL steps too (a curve per "
                    "side; the evals run inside the timed loop, so leave it 0 for the wall-clock table)")
    ap.add_argument("--stale-lr", choices=("inverse", "none"), default=None, help="rl.stale_lr on every side (the "
                    "config's default if unset; none = rl.lr whatever the staleness)")
    ap.add_argument("--first-repeat", type=int, default=0, help="repeats run RL seeds seed+first .. seed+first+repeats-1")
    ap.add_argument("--cache", default="", help="directory for the warm-up weights (reused when present)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    cache = Path(args.cache) if args.cache else None
    out = []
    for domain in args.domains.split(","):
        t0 = time.perf_counter()
        ov, model, tok, train, held, sandbox = (_tools_setup if domain == "tools" else _code_setup)(args, cache)
        print(f"[{domain}] warm-up {time.perf_counter() - t0:.0f}s", flush=True)
        ks = [k if k in ("0h", "0l", "1p", "2p") else int(k) for k in args.ks.split(",")]
        runs = [run_side(domain, k, ov, model, tok, train, held, sandbox, args.steps, rep, args.eval_every, args.stale_lr)
                for rep in range(args.first_repeat, args.first_repeat + args.repeats) for k in ks]  # interleaved: the host's load drifts
        sides = []
        for k in ks:
            mine = [r for r in runs if r["k"] == k]
            side = dict(mine[-1], walls=[r["wall_s"] for r in mine], wall_s=statistics.median(r["wall_s"] for r in mine))
            side["phases"] = {p: statistics.median(r["phases"][p] for r in mine) for p in side["phases"]}
            side["runs"] = mine  # every repeat's pass@1 and per-task passes: RL on a tiny model varies run to run
            sides.append(side)
        for s in sides:
            s["speedup"] = sides[0]["wall_s"] / s["wall_s"]
            # each repeat paired with the synchronous run of the same repeat (same tasks), then pooled
            s["vs_k0_runs"] = [paired(a, b) for a, b in zip(sides[0]["runs"], s["runs"])]
            fell, rose = sum(x["fell"] for x in s["vs_k0_runs"]), sum(x["rose"] for x in s["vs_k0_runs"])
            s["vs_k0"] = {"fell": fell, "rose": rose, "p": mcnemar_exact(fell, rose),
                          "n": sum(x["n"] for x in s["vs_k0_runs"])}
            s["pass_runs"] = [r["pass@1"] for r in s["runs"]]
            s["pass@1"] = statistics.fmean(s["pass_runs"])
            ph = s["phases"]
            print(f"[{domain}] K={s['k']}: wall {s['wall_s']:.1f}s x{s['speedup']:.2f} samples {s['samples']} "
                  f"pass@1 mean {s['pass@1']:.3f} runs {' '.join(f'{x:.3f}' for x in s['pass_runs'])} "
                  f"(vs K=0, pooled over repeats: -{fell} +{rose} p={s['vs_k0']['p']:.2g}) | "
                  + " ".join(f"{k} {v:.1f}" for k, v in ph.items()), flush=True)
            for r in s["runs"] if args.eval_every else []:
                print(f"    seed {r['seed']}: held-out during RL " + " ".join(f"{i}:{v:.3f}" for i, v in r["curve"]),
                      flush=True)
        out += sides
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    for s in out:  # the per-task passes are only for the paired tests
        s.pop("passed", None)
        s["runs"] = [{k: v for k, v in r.items() if k != "passed"} for r in s["runs"]]
    Path(args.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "args": vars(args), "sides": out},
                                          indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
