"""The RL update's memory and time against the tokens it runs at once (`rl.micro_tokens`), on a real model.

    .venv/bin/python benchmarks/update_memory.py [--model-dir models/smollm2] [--groups 2 4 8] [--micro 0 auto 512]
        [--precision fp32 bf16]

SmolLM2-135M-Instruct with LoRA r 16 on q/k/v/o (the TRL side-by-side's set-up), GRPO groups of 8
samples of --completion tokens after a 46-token prompt (the unit-conversion task's shape), random
token ids, one `update_policy` call (forward, backward, clip, AdamW) after a warm-up call on one sample,
in fp32 or under bf16 autocast (`trainer.precision: bf16`, what `auto` picks beside bf16 rollouts).
Each case runs in its own process, so its peak RSS (ru_maxrss) is its own: the update's memory is
the peak minus the RSS before the timed call. Prints a markdown table with the estimate
`rl.micro_tokens: auto` works from (train/update_memory.py) beside what was measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from rl_update_speed import header  # noqa: E402

CASE = r"""
import json, random, resource, sys, time, torch
torch.set_num_threads(int(sys.argv[5]))
from transformers import AutoModelForCausalLM
from posttrain.config import LoraConfig, RLConfig, TrainerConfig
from posttrain.train import update
from posttrain.train.lora import prepare_model
from posttrain.train.update_memory import activation_bytes_per_token, micro_token_limit
from posttrain.types import Trajectory, Turn
model_dir, groups, L, micro, precision = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[6]
micro = micro if micro == "auto" else int(micro)
G, P = 8, 46
tcfg = TrainerConfig(lora=LoraConfig(r=16, alpha=32), precision=precision)
m = prepare_model(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), tcfg, 0)
opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-6)
rng = random.Random(0)
trajs = []
for g in range(groups):
    prompt = tuple(rng.randrange(100, 40000) for _ in range(P))
    for s in range(G):
        toks = tuple(rng.randrange(100, 40000) for _ in range(L))
        trajs.append(Trajectory(f"t{g}", "v", "d", prompt, (Turn("assistant", "", toks, tuple([-1.0] * L)),),
                                group=g, sample=s))
adv = torch.randn(len(trajs), generator=torch.Generator().manual_seed(0))
cfg = RLConfig(max_new_tokens=L, micro_tokens=micro)
update.update_policy(m, opt, trajs[:1], adv[:1], cfg, 0, tcfg=tcfg)  # warm-up on one sample: lazy inits
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
update.update_policy(m, opt, trajs, adv, cfg, 0, tcfg=tcfg)
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(dict(tokens=groups * (P + G * L), limit=micro_token_limit(m, micro), seconds=dt,
                      before=before, peak=peak, estimate_per_token=activation_bytes_per_token(m))))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default="models/smollm2")
    ap.add_argument("--groups", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--micro", nargs="+", default=["0", "auto"])
    ap.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32"],
                    help="the update's numerics: fp32, or bf16 autocast (trainer.precision)")
    ap.add_argument("--completion", type=int, default=30, help="tokens per sample")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json-out", default="")
    a = ap.parse_args()
    if not (Path(a.model_dir) / "config.json").exists():
        raise SystemExit(f"update_memory: no HF model in {a.model_dir} "
                         "(posttrain models get smollm2-135m-instruct --out models/smollm2)")
    header(a.threads)  # date, CPU and its bf16 flags, torch, threads, load
    rows = []
    for g in a.groups:
        for micro in a.micro:
            for precision in a.precision:
                r = subprocess.run([sys.executable, "-c", CASE, a.model_dir, str(g), str(a.completion), micro,
                                    str(a.threads), precision], capture_output=True, text=True, check=True)
                rows.append(dict(groups=g, micro=micro, precision=precision,
                                 **json.loads(r.stdout.strip().splitlines()[-1])))
    print("| groups | tokens | rl.micro_tokens | precision | tokens at once | update s | update memory GiB | "
          "MB / token | estimate MB / token |\n|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        used = r["peak"] - r["before"]
        print(f"| {r['groups']} | {r['tokens']} | {r['micro']} | {r['precision']} | {r['limit'] or 'all'} | "
              f"{r['seconds']:.2f} | "
              f"{used / 2**30:.2f} | {used / r['tokens'] / 1e6:.2f} | {r['estimate_per_token'] / 1e6:.2f} |")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
