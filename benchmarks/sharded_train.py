"""Sharded training overhead on this machine: step time and memory per rank at world size 1, 2
and 4 (FSDP2, and dp x tp = 2 x 2) at the same global batch, and bytes communicated per step
measured against the FSDP + TP model's prediction (posttrain/parallel/accounting.py).

    .venv/bin/python benchmarks/sharded_train.py [--steps 4] [--batch 16] [--hidden 128] [--layers 2]

Every configuration runs the same SFT batches (seeded) on the tiny Llama (fp32, gloo).
"plain" is the one-process loop (sft.train_encoded's step, no process group). Step time is
the median over --steps timed steps after one warm-up, with accounting off; the bytes come
from one more step with it on. Threads: --threads per rank (default 1, so that world size N
uses N cores where it has them, and no run oversubscribes a loaded machine); on 2 cores,
world size 4 runs 4 single-thread ranks on 2 cores, and the table reports that as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def model_and_items(hidden: int, layers: int, n_items: int = 64):
    import random

    from posttrain.config import TinyModelConfig
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(TinyModelConfig(hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                                            num_attention_heads=4, num_key_value_heads=4), seed=0)
    rng = random.Random(0)
    items = []
    for _ in range(n_items):
        k, a = rng.randrange(20, 40), rng.randrange(20, 40)
        items.append(([rng.randrange(11, 100) for _ in range(k + a)], [0] * k + [1] * a))
    return model, tok, items


def sft_cfg(args):
    from posttrain.config import SFTConfig

    return SFTConfig(steps=args.steps + 2, batch_size=args.batch, lr=1e-3, max_len=128)


def plain(args) -> dict:
    """The one-process step, timed the same way."""
    from posttrain.config import TrainerConfig
    from posttrain.train.sft import train_encoded

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))
    model, tok, items = model_and_items(args.hidden, args.layers)
    times: list[float] = []
    last = [time.perf_counter()]

    def on_step(step, row):
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    train_encoded(model, tok.pad_token_id, items, sft_cfg(args), TrainerConfig(precision="fp32"), on_step=on_step)
    n = model.num_parameters()
    return {"world": 1, "tp": 1, "mode": "plain", "step_s": statistics.median(times[1:-1]),
            "state_bytes": n * 4 * 4, "activation_bytes": None, "sent": 0.0, "predicted": 0.0}


def rank_job(out: str, tp: int, args) -> int:
    """One rank of a sharded configuration (run by launch.run_ranks)."""
    from posttrain.config import OptimConfig, TrainerConfig
    from posttrain.parallel.mesh import init_group

    init_group(120)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank > 0:
        import posttrain.train.sharded.session  # noqa: F401
        from posttrain.parallel.group import follow

        return follow(rank, world, 120)
    from posttrain.train.sharded.loops import train_encoded_sharded
    from posttrain.train.sharded.session import ShardedSession

    model, tok, items = model_and_items(args.hidden, args.layers)
    tcfg = TrainerConfig(tp=tp, mixed_precision="fp32", timeout_s=120)
    sh = ShardedSession.start(model, tcfg, OptimConfig(lr=1e-3, weight_decay=0.01), tok.pad_token_id)
    sh.driver.call("set_options", {"account": False})
    cfg = sft_cfg(args)
    times: list[float] = []
    last = [time.perf_counter()]
    rows = []

    def on_step(step, row):
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now
        rows.append(row)
        if step == cfg.steps - 2:  # the last step is measured for bytes
            sh.driver.call("set_options", {"account": True})

    train_encoded_sharded(sh, items, cfg, tcfg, on_step=on_step)
    r = rows[-1]
    Path(out).write_text(json.dumps({
        "world": world, "tp": tp, "mode": "fsdp" if tp == 1 else f"dp{world // tp}xtp{tp}",
        "step_s": statistics.median(times[1:-1]),
        "state_bytes": r["shard/param_bytes"] + r["shard/grad_bytes"] + r["shard/optim_bytes"],
        "activation_bytes": r["shard/activation_bytes"], "sent": r["shard/sent_bytes"],
        "predicted": r["shard/sent_bytes_predicted"]}))
    sh.close()
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--rank-job", nargs=2, metavar=("OUT", "TP"))
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    if args.rank_job:
        sys.exit(rank_job(args.rank_job[0], int(args.rank_job[1]), args))
    from posttrain.parallel.launch import run_ranks

    results = [plain(args)]
    base = [a for a in sys.argv[1:]]
    with tempfile.TemporaryDirectory() as d:
        for world, tp in ((1, 1), (2, 1), (4, 1), (4, 2), (2, 2)):
            out = Path(d) / f"{world}-{tp}.json"
            code = run_ranks([sys.executable, __file__, *base, "--rank-job", str(out), str(tp)], world, 120)
            if code != 0:
                raise SystemExit(f"world {world} tp {tp} failed ({code})")
            results.append(json.loads(out.read_text()))
    t0 = results[0]["step_s"]
    print(f"global batch {args.batch} sequences, {args.steps} timed steps, tiny Llama hidden {args.hidden} x "
          f"{args.layers} layers, fp32, gloo, {os.cpu_count()} cores, {args.threads} thread(s) per rank, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| world | mesh | step s | vs plain | param+grad+optim B/rank | activation B/rank | sent B/step (measured) "
          "| predicted | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        err = "" if not r["predicted"] else f"{(r['sent'] - r['predicted']) / r['predicted'] * 100:+.2f}%"
        act = "" if r["activation_bytes"] is None else f"{r['activation_bytes']:,.0f}"
        print(f"| {r['world']} | {r['mode']} | {r['step_s']:.3f} | {r['step_s'] / t0:.2f}x | {r['state_bytes']:,.0f} | "
              f"{act} | {r['sent']:,.0f} | {r['predicted']:,.0f} | {err} |")


if __name__ == "__main__":
    main()
