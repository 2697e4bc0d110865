"""Issue 38's speed items: A against B in one process (interleaved repeats, medians), and the weight sync's parts.

    .venv/bin/python benchmarks/rl_update_speed.py update [--repeats 5] [--threads 1] [--pass-tokens 2048 4096] [--bf16]
        [--cell G MEAN] [--dense]
    .venv/bin/python benchmarks/rl_update_speed.py rollout --model-dir models/smollm2 [--repeats 3] [--threads 2]
    .venv/bin/python benchmarks/rl_update_speed.py sync --model-dir models/smollm2 [--repeats 5] [--threads 2]

`update`: the shared-prefix update at G = 16, ~86 completion tokens (rl_step_bench.py's cell:
the built-in tiny model, 16 prompts of 10-40 tokens), `rl.prefix_layout` kv (a prompt pass and
several completion passes) against varlen (train/varlen.py: one flat row, one forward; and the
same cut into passes of whole groups of about --pass-tokens tokens). One step = update_policy
(pack, forward, backward, clip, AdamW), as the RL loop calls it.

`sync`: the weight sync after each update, on a real model with LoRA r = 16 on q/k/v/o into a
`fast` engine with bf16 matmul weights: the LoRA merge, the install's check-and-copy and its
verification, medians of --repeats rounds (each after nudging every adapter).

`rollout`: bf16 rollouts with the fp32 recompute against fp32 rollouts, on a real model (an HF
directory, e.g. `posttrain models get smollm2-135m-instruct --out models/smollm2`) with LoRA
r = 8: what `engine.args.matmul_dtype: auto` picks here and the matmuls it timed; generation
seconds for --prompts x --group samples of --new-tokens tokens in fp32 and in bf16 (`fast`,
EOS ignored so both make the same number of tokens); the update on those samples with the
engine's logprobs (fp32 rollouts, rl.old_logprobs=engine) and with the recompute fused into
the update's forward (bf16 rollouts, rl.old_logprobs=recompute), the same under bf16 autocast
(what trainer.precision auto picks beside measured-faster bf16 rollouts), and the separate no-grad
recompute pass that several minibatches or epochs need; the logprob gap the recompute
corrects (mean and max |engine bf16 - trainer fp32| over completion tokens).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from rl_step_bench import grpo_batch  # noqa: E402

from posttrain.config import RLConfig, TinyModelConfig  # noqa: E402
import posttrain.train.update as update  # noqa: E402


def header(threads: int) -> None:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    flags = next((ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")), "")
    has = [f for f in ("avx512_bf16", "amx_bf16") if f in flags.split()]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu} ({', '.join(has) or 'no bf16 flags'}), "
          f"torch {torch.__version__}, {threads} threads, load {os.getloadavg()[0]:.1f}")


def interleaved(fns: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each fn, one warm-up round, then `repeats` rounds in turn."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(repeats + 1):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            if r:
                times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def bench_update(repeats: int, pass_tokens: list[float], bf16: bool, group: int = 16, mean: int = 86,
                 dense: bool = False) -> None:
    from posttrain.config import TrainerConfig
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(TinyModelConfig())
    trajs = grpo_batch(16, group, mean, (len(tok) - 97, len(tok)), seed=group * 100 + mean)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    adv = torch.randn(len(trajs))

    def step(layout: str, passes: float = float("inf"), precision: str = "fp32") -> None:
        update.varlen_pass_tokens = lambda model: passes  # the layout's pass size for this variant
        update.update_policy(model, opt, trajs, adv, RLConfig(max_new_tokens=3 * mean // 2 + 1, prefix_layout=layout),
                             tok.pad_token_id, tcfg=TrainerConfig(precision=precision))

    fns = {"kv": lambda: step("kv"), "varlen (one pass)": lambda: step("varlen")}
    fns.update({f"varlen, passes of {int(p)} tokens": functools.partial(step, "varlen", p) for p in pass_tokens})
    if dense:
        fns["dense"] = lambda: step("dense")
    if bf16:  # not an equal-numerics layout: trainer.precision=bf16 autocast, for what the CPU's bf16 units give
        fns["kv, trainer.precision=bf16 (autocast)"] = functools.partial(step, "kv", precision="bf16")
    t = interleaved(fns, repeats)
    trained = sum(len(x.token_ids) for tr in trajs for x in tr.turns)
    print(f"G = {group}, 16 prompts, ~{mean} tokens each, {trained} completion tokens; median of {repeats} "
          "interleaved rounds")
    print("| layout | s / update | vs kv |\n|---|---:|---:|")
    for k, v in t.items():
        print(f"| {k} | {v:.3f} | {t['kv'] / v:.2f}x |")


def sample(model, tok, dtype: str, prompts: list[tuple[int, ...]], group: int, new: int):
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.types import Trajectory, Turn

    eng = FastEngine(model, tok, matmul_dtype=dtype, ignore_eos=True)
    params = SamplingParams(temperature=1.0, max_new_tokens=new, n=group, seed=11)
    outs = eng.generate([GenRequest(p, params) for p in prompts])
    return [Trajectory(f"t{k // group}", "v", "d", prompts[k // group],
                       (Turn("assistant", "", tuple(c.token_ids), tuple(c.logprobs)),), group=k // group,
                       sample=k % group) for k, c in enumerate(outs)]


def bench_rollout(model_dir: Path, repeats: int, n_prompts: int, group: int, new: int) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain.config import LoraConfig, TrainerConfig
    from posttrain.rollout.engines.fast import matmul_choice
    from posttrain.train.batching import pack_trajectories
    from posttrain.train.lora import prepare_model

    fp32_s, bf16_s = matmul_choice.time_matmuls()
    picked = matmul_choice.choose(fp32_s, bf16_s)
    print(f"auto: {picked} (decode-shaped matmul: fp32 {fp32_s * 1e3:.2f} ms, bf16 {bf16_s * 1e3:.2f} ms)", flush=True)
    if picked == "float32":  # an AVX2-only CPU: the forced-bf16 arms took over 15 minutes at the RL shape
        print(f"# auto avoids bf16 here; the bf16 arms below time what it avoids, about {bf16_s / fp32_s:.0f}x slower "
              "a matmul: expect them to take long", flush=True)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(model_dir)
    questions = [f"What is {17 * k + 23} plus {31 * k + 9}? Answer with the number only." for k in range(n_prompts)]
    prompts = [tuple(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                             return_dict=False)) for q in questions]
    policy = prepare_model(copy.deepcopy(base), TrainerConfig(lora=LoraConfig()), 0)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-6)
    batches = {}
    gen = interleaved({d: lambda d=d: batches.__setitem__(d, sample(base, tok, d, prompts, group, new))
                       for d in ("float32", "bfloat16")}, repeats)
    print(f"# generation timed: fp32 {gen['float32']:.2f} s, bf16 {gen['bfloat16']:.2f} s; now the updates", flush=True)
    adv = torch.randn(len(batches["float32"]), generator=torch.Generator().manual_seed(0))
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    cfg = {how: RLConfig(max_new_tokens=new, old_logprobs=how) for how in ("engine", "recompute")}
    bf16_update = TrainerConfig(precision="bf16")  # what trainer.precision auto resolves to beside bf16 rollouts
    upd = interleaved({
        "fp32 rollouts, engine logprobs": lambda: update.update_policy(policy, opt, batches["float32"], adv,
                                                                       cfg["engine"], pad),
        "bf16 rollouts, fused recompute": lambda: update.update_policy(policy, opt, batches["bfloat16"], adv,
                                                                       cfg["recompute"], pad),
        "bf16 rollouts, fused recompute, bf16 autocast update": lambda: update.update_policy(
            policy, opt, batches["bfloat16"], adv, cfg["recompute"], pad, tcfg=bf16_update),
        "separate no-grad recompute pass": lambda: update.recompute_old_logprobs(policy, [batches["bfloat16"]], pad,
                                                                                 cfg["recompute"]),
    }, repeats)
    tb = pack_trajectories(batches["bfloat16"], pad)
    (fp32_lp,) = update.recompute_old_logprobs(policy, [batches["bfloat16"]], pad, cfg["recompute"])
    gap = (fp32_lp - tb.old_logp).abs() * tb.loss_mask
    print(f"{n_prompts} prompts x {group} samples x {new} tokens, LoRA r=8; median of {repeats} interleaved rounds")
    print("| part | fp32 rollouts | bf16 rollouts + recompute | the same, bf16 autocast update |\n"
          "|---|---:|---:|---:|")
    print(f"| generation s | {gen['float32']:.2f} | {gen['bfloat16']:.2f} | {gen['bfloat16']:.2f} |")
    a, b = upd["fp32 rollouts, engine logprobs"], upd["bf16 rollouts, fused recompute"]
    c = upd["bf16 rollouts, fused recompute, bf16 autocast update"]
    print(f"| update s (fused recompute: no extra forward) | {a:.2f} | {b:.2f} | {c:.2f} |")
    print(f"| step s (generation + update) | {gen['float32'] + a:.2f} | {gen['bfloat16'] + b:.2f} "
          f"({(gen['bfloat16'] + b) / (gen['float32'] + a):.2f}x) | {gen['bfloat16'] + c:.2f} "
          f"({(gen['bfloat16'] + c) / (gen['float32'] + a):.2f}x) |")
    print(f"separate recompute pass (several minibatches/epochs): {upd['separate no-grad recompute pass']:.2f} s; "
          f"logprob gap corrected: mean {float(gap.sum() / tb.loss_mask.sum()):.4f}, max {float(gap.max()):.4f}")


def bench_sync(model_dir: Path, repeats: int, rank: int = 16) -> None:
    """The RL loop's weight sync after an update (LocalTrainer.push_weights): LoRA r = `rank` on
    q/k/v/o merged into plain weights (rl_model.plain_state), then installed into a `fast` engine
    holding bf16 matmul weights and verified (weight_sync.install). Each round first nudges every
    adapter, as an optimizer step does, so the 120 merged matrices change and the rest do not."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain.config import LoraConfig, TrainerConfig
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.train.lora import prepare_model
    from posttrain.train.rl_model import plain_state

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(model_dir)
    eng = FastEngine(copy.deepcopy(base), tok, matmul_dtype="bfloat16")
    lora = LoraConfig(r=rank, alpha=2 * rank, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    policy = prepare_model(base, TrainerConfig(lora=lora), 0)
    adapters = [p for p in policy.parameters() if p.requires_grad]
    g = torch.Generator().manual_seed(0)
    parts: dict[str, list[float]] = {"merge s": [], "install: check + copy s": [], "install: verify s": [], "sync s": []}
    for r in range(repeats + 1):
        with torch.no_grad():
            for p in adapters:
                p.add_(torch.randn(p.shape, generator=g) * 1e-3)
        t0 = time.perf_counter()
        state = plain_state(policy)
        t1 = time.perf_counter()
        rep = eng.load_weights(state, r + 1)
        t2 = time.perf_counter()
        if r:  # round 0 warms up
            for k, v in zip(parts, (t1 - t0, rep.copy_s, rep.verify_s, t2 - t0)):
                parts[k].append(v)
    print(f"{model_dir}: LoRA r={rank} on q/k/v/o, fast engine matmul_dtype bfloat16; {len(rep.changed)} of "
          f"{rep.tensors} tensors changed a sync; median of {repeats}")
    print("| part | s |\n|---|---:|")
    for k, v in parts.items():
        print(f"| {k} | {statistics.median(v):.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["update", "rollout", "sync"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pass-tokens", type=float, nargs="*", default=[4096.0], help="update: varlen pass sizes too")
    ap.add_argument("--bf16", action="store_true", help="update: also kv under trainer.precision=bf16 autocast")
    ap.add_argument("--cell", type=int, nargs=2, default=[16, 86], metavar=("G", "MEAN"),
                    help="update: group size and mean completion tokens (16 prompts)")
    ap.add_argument("--dense", action="store_true", help="update: also the dense layout")
    ap.add_argument("--model-dir", type=Path, default=Path("models/smollm2"))
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    header(a.threads)
    if a.what == "update":
        bench_update(a.repeats, a.pass_tokens, a.bf16, a.cell[0], a.cell[1], a.dense)
    elif a.what == "sync":
        bench_sync(a.model_dir, a.repeats)
    else:
        bench_rollout(a.model_dir, a.repeats, a.prompts, a.group, a.new_tokens)
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
