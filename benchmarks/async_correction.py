"""High staleness, raised learning rate: the off-policy correction on vs off, side by side.

    .venv/bin/python benchmarks/async_correction.py [--k 6] [--lrs 1e-4,3e-4,1e-3] [--steps 60]
                                                    [--corrections none,tis,icepop] [--seeds 0,1,2,3,4]

One SFT warm-up of the tiny model on arithmetic (oracle demonstrations), then, from copies of
it, for each learning rate of the sweep: the synchronous loop (K = 0, the on-policy
reference) and the asynchronous loop at rl.max_staleness=K with each correction
(train/offpolicy.py), for the same steps and RL seeds. Reported per correction: the reward curve (PNG), the mean
reward of the last quarter of the steps, the peak and mean trainer-vs-engine KL estimate
(train/offpolicy/kl), the share of tokens clipped or masked, and held-out pass@1 (greedy).
`none` trains on the stale samples as if on-policy (ratio against the trainer's own
pre-update logprobs, no importance weight). Every side runs with rl.stale_lr=none, so the
learning rate is the sweep's and the correction is measured alone.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import tempfile
import time
from pathlib import Path


def run_side(args, ov, model, tok, splits, lr: float, k: int, name: str, seed: int) -> dict:
    """One RL run from a copy of the warm-up at (lr, K, correction, RL seed); K = 0 is the on-policy reference."""
    from posttrain.config import load_config
    from posttrain.train.rl import build_state, run_eval, train_rl

    c = load_config(None, [*ov, f"seed={seed}", f"rl.lr={lr}", f"rl.max_staleness={k}", f"rl.offpolicy.name={name}",
                           "rl.offpolicy.max_kl=1e9", "rl.stale_lr=none"])  # the correction alone, at the raised lr
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        st = build_state(c, Path(d), copy.deepcopy(model), tok, splits.rl, splits.held_out, None)
        before = asyncio.run(run_eval(st)).mean_over_domains()  # the SFT warm-up's, same on every side
        asyncio.run(train_rl(st))
        res = asyncio.run(run_eval(st))
        rows = st.metrics.read()
        st.metrics.close(), st.store.close()
    q = rows[-max(1, len(rows) // 4):]
    kls = [r.get("train/offpolicy/kl", 0.0) for r in rows]
    side = {"lr": lr, "k": k, "correction": name, "seed": seed, "reward": [r["reward/mean"] for r in rows], "kl": kls,
            "last_quarter_reward": sum(r["reward/mean"] for r in q) / len(q), "kl_max": max(kls),
            "kl_mean": sum(kls) / len(kls), "pass@1": res.mean_over_domains(), "pass@1_before": before,
            "clipped_frac": sum(r.get("train/offpolicy/clipped_frac", 0.0) for r in rows) / len(rows),
            "masked_frac": sum(r.get("train/offpolicy/masked_frac", 0.0) for r in rows) / len(rows),
            "wall_s": time.perf_counter() - t0}
    print(f"lr={lr:g} K={k} {name:>7} seed {seed}: last-quarter reward {side['last_quarter_reward']:.3f} "
          f"pass@1 {before:.3f} -> {side['pass@1']:.3f} KL max {side['kl_max']:.3g} mean {side['kl_mean']:.3g} "
          f"clipped {side['clipped_frac']:.3f} masked {side['masked_frac']:.3f} ({side['wall_s']:.0f}s)", flush=True)
    return side


def summarise(sides: list[dict]) -> list[dict]:
    """Per (lr, K, correction): means over the seeds."""
    keys = list(dict.fromkeys((x["lr"], x["k"], x["correction"]) for x in sides))
    out = []
    for lr, k, name in keys:
        xs = [x for x in sides if (x["lr"], x["k"], x["correction"]) == (lr, k, name)]
        out.append({"lr": lr, "k": k, "correction": name, "seeds": len(xs), "pass@1_before": xs[0]["pass@1_before"],
                    "pass@1_mean": sum(x["pass@1"] for x in xs) / len(xs), "pass@1_min": min(x["pass@1"] for x in xs),
                    "last_quarter_reward_mean": sum(x["last_quarter_reward"] for x in xs) / len(xs),
                    "kl_mean": sum(x["kl_mean"] for x in xs) / len(xs),
                    "masked_frac": sum(x["masked_frac"] for x in xs) / len(xs),
                    "clipped_frac": sum(x["clipped_frac"] for x in xs) / len(xs)})
    return out


def plot(sides: list[dict], summary: list[dict], png: Path) -> None:
    """Mean reward and KL curves over the seeds, one column per learning rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lrs = sorted({x["lr"] for x in sides})
    fig, axes = plt.subplots(2, len(lrs), figsize=(4.2 * len(lrs), 6.5), squeeze=False)
    colour = {key: f"C{i}" for i, key in enumerate(dict.fromkeys((r["k"], r["correction"]) for r in summary))}
    for j, lr in enumerate(lrs):
        for r in (r for r in summary if r["lr"] == lr):  # the mean curve over the seeds
            xs = [x for x in sides if (x["lr"], x["k"], x["correction"]) == (lr, r["k"], r["correction"])]
            label = "K=0 (on-policy)" if r["k"] == 0 else f"K={r['k']} {r['correction']}"
            c = colour[r["k"], r["correction"]]
            axes[0][j].plot([sum(v) / len(v) for v in zip(*(x["reward"] for x in xs))], label=label, color=c)
            if r["k"]:
                axes[1][j].plot([max(sum(v) / len(v), 1e-6) for v in zip(*(x["kl"] for x in xs))], label=label, color=c)
        axes[0][j].set(title=f"reward/mean (mean of seeds), lr={lr:g}", xlabel="step", ylim=(-0.02, 1.02))
        axes[1][j].set(title="trainer-vs-engine KL (k3)", xlabel="step", yscale="log")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--lrs", default="1e-4,3e-4,1e-3", help="a sweep: where does the uncorrected run degrade?")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--sft-steps", type=int, default=400)
    ap.add_argument("--difficulty", type=float, default=0.8)
    ap.add_argument("--corrections", default="none,tis,icepop")
    ap.add_argument("--seeds", default="0,1,2,3,4", help="RL seeds (sampling, task order); one warm-up for all")
    ap.add_argument("--out", default="benchmarks/results/async_correction")
    ap.add_argument("--replot", action="store_true", help="redraw the PNG from --out's JSON; run nothing")
    args = ap.parse_args()
    if args.replot:
        res = json.loads(Path(args.out).with_suffix(".json").read_text())
        return plot(res["sides"], res["summary"], Path(args.out).with_suffix(".png"))
    import torch

    from posttrain.config import SFTConfig, load_config
    from posttrain.models.tiny import build_tiny
    from posttrain.tasks.splits import make_splits
    from posttrain.train.sft import sft_train

    torch.set_num_threads(2)
    ov = [f"tasks.domains={{arithmetic: {{n_train: 1000, n_eval: 100, difficulty: {args.difficulty}}}}}",
          "rl.prompts_per_step=8", "rl.group_size=8", "rl.max_new_tokens=8", "rl.warmup_steps=1",
          "rl.checkpoint_every=0", f"rl.steps={args.steps}", "engine.name=fast"]
    cfg = load_config(None, ov)
    splits = make_splits(cfg)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    sft_train(model, tok, [(t.prompt, t.oracle) for t in splits.sft], SFTConfig(steps=args.sft_steps, batch_size=64, lr=3e-3))
    sides = []
    for lr in [float(x) for x in args.lrs.split(",")]:
        for k, name in [(0, "none"), *[(args.k, n) for n in args.corrections.split(",")]]:
            for seed in [int(x) for x in args.seeds.split(",")]:
                sides.append(run_side(args, ov, model, tok, splits, lr, k, name, seed))
    summary = summarise(sides)
    for r in summary:
        print(f"lr={r['lr']:g} K={r['k']} {r['correction']:>7}: pass@1 {r['pass@1_before']:.3f} -> mean "
              f"{r['pass@1_mean']:.3f} (min {r['pass@1_min']:.3f}) over {r['seeds']} seeds; last-quarter reward "
              f"{r['last_quarter_reward_mean']:.3f}; KL mean {r['kl_mean']:.3g}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "args": vars(args), "summary": summary,
                                                    "sides": sides},
                                                   indent=1))
    plot(sides, summary, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
