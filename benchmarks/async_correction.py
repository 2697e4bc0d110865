"""High staleness, raised learning rate: the off-policy correction on vs off, side by side.

    .venv/bin/python benchmarks/async_correction.py [--k 6] [--lr 3e-3] [--steps 40]
                                                    [--corrections none,tis,icepop]

One SFT warm-up of the tiny model on arithmetic (oracle demonstrations), then, from copies of
it, the asynchronous RL loop at rl.max_staleness=K with each correction (train/offpolicy.py)
for the same steps, lr and seed. Reported per correction: the reward curve (PNG), the mean
reward of the last quarter of the steps, the peak and mean trainer-vs-engine KL estimate
(train/offpolicy/kl), the share of tokens clipped or masked, and held-out pass@1 (greedy).
`none` trains on the stale samples as if on-policy (ratio against the trainer's own
pre-update logprobs, no importance weight).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sft-steps", type=int, default=200)
    ap.add_argument("--corrections", default="none,tis,icepop")
    ap.add_argument("--out", default="benchmarks/results/async_correction")
    args = ap.parse_args()
    import torch

    from posttrain.config import SFTConfig, load_config
    from posttrain.models.tiny import build_tiny
    from posttrain.tasks.splits import make_splits
    from posttrain.train.rl import build_state, run_eval, train_rl
    from posttrain.train.sft import sft_train

    torch.set_num_threads(2)
    ov = ["seed=0", "tasks.domains={arithmetic: {n_train: 1000, n_eval: 100, difficulty: 0.8}}",
          "rl.prompts_per_step=8", "rl.group_size=8", "rl.max_new_tokens=8", f"rl.lr={args.lr}", "rl.warmup_steps=1",
          "rl.checkpoint_every=0", f"rl.steps={args.steps}", f"rl.max_staleness={args.k}", "engine.name=fast"]
    cfg = load_config(None, ov)
    splits = make_splits(cfg)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    sft_train(model, tok, [(t.prompt, t.oracle) for t in splits.sft], SFTConfig(steps=args.sft_steps, batch_size=32, lr=3e-3))
    sides = []
    for name in args.corrections.split(","):
        c = load_config(None, [*ov, f"rl.offpolicy.name={name}", "rl.offpolicy.max_kl=1e9"])
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            st = build_state(c, Path(d), copy.deepcopy(model), tok, splits.rl, splits.held_out, None)
            asyncio.run(train_rl(st))
            res = asyncio.run(run_eval(st))
            rows = st.metrics.read()
            st.metrics.close(), st.store.close()
        q = rows[-max(1, len(rows) // 4):]
        kls = [r.get("train/offpolicy/kl", 0.0) for r in rows]
        side = {"correction": name, "reward": [r["reward/mean"] for r in rows], "kl": kls,
                "last_quarter_reward": sum(r["reward/mean"] for r in q) / len(q), "kl_max": max(kls),
                "kl_mean": sum(kls) / len(kls), "pass@1": res.mean_over_domains(),
                "clipped_frac": sum(r.get("train/offpolicy/clipped_frac", 0.0) for r in rows) / len(rows),
                "masked_frac": sum(r.get("train/offpolicy/masked_frac", 0.0) for r in rows) / len(rows),
                "wall_s": time.perf_counter() - t0}
        sides.append(side)
        print(f"K={args.k} lr={args.lr} {name:>7}: last-quarter reward {side['last_quarter_reward']:.3f} "
              f"pass@1 {side['pass@1']:.3f} KL max {side['kl_max']:.3g} mean {side['kl_mean']:.3g} "
              f"clipped {side['clipped_frac']:.3f} masked {side['masked_frac']:.3f} ({side['wall_s']:.0f}s)", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "args": vars(args), "sides": sides},
                                                   indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
    for s in sides:
        a.plot(s["reward"], label=s["correction"])
        b.plot(s["kl"], label=s["correction"])
    a.set(title=f"reward/mean, K={args.k}, lr={args.lr}", xlabel="step")
    b.set(title="trainer-vs-engine KL (k3)", xlabel="step", yscale="log")
    a.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=90)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
