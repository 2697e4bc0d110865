"""Seconds per RL policy update by sample layout, side by side in one process.

    .venv/bin/python benchmarks/rl_step_bench.py [--repeats 3] [--threads 1]        # the G x tokens table
    .venv/bin/python benchmarks/rl_step_bench.py --groups 16 --means 86 --repeats 5  # one cell
    .venv/bin/python benchmarks/rl_step_bench.py --smollm2 [--lora] [--repeats 2]   # tokens trained / s
    .venv/bin/python benchmarks/rl_step_bench.py --smollm2 --lora --prompts 8 --prompt-tokens 200 600 \
        --long-prompt 2591 --mean-tokens 128 --layouts kv kv-1pass               # a recipe step with an outlier

One step = `update_policy` on a GRPO batch (pack, forward, backward, clip, AdamW step), as
train/rl.py calls it. Layouts:
- `plain`: rl.share_prefix=false, one row per sample (prompt + completion).
- `dense`: rl.prefix_layout=dense, a group's completions in one row behind its prompt with a
  4D mask (train/shared_prefix.py): attention (P + G L)^2 per group.
- `kv`: rl.prefix_layout=kv, the prompt run once and its K/V read by every completion
  (train/prefix_kv.py): attention ~ G L (P + L). Prompts are cut into passes by length.
- `kv-1pass`: kv with all prompts in one pass, left-padded to the longest (as before the
  bucketing): the reference for a batch with one long prompt (`--long-prompt`).
The default, rl.prefix_layout=auto, picks kv or dense by a cost model; the table's
`auto picks` row says which it picks for each cell (it is not timed separately).

Table: the built-in tiny model (fp32), 16 prompts of 10-40 tokens, G samples each, completion
lengths uniform in [m/2, 3m/2] for mean m. Each cell runs the layouts interleaved (one
warm-up step each, then `--repeats` rounds) and reports the median; ratios are per cell.

`--smollm2`: a SmolLM2-135M-sized Llama (random init; real weights when --model-dir holds
an HF checkpoint), 4 prompts x 8 samples of ~64 tokens; reports completion tokens trained
per second (tokens in the loss mask / step seconds). `--lora` trains LoRA r=8 on q,v
instead of all weights.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import time
from pathlib import Path

import torch

from posttrain.config import RLConfig, TinyModelConfig
from posttrain.train.update import update_policy
from posttrain.types import Trajectory, Turn

LAYOUTS = {"plain": dict(share_prefix=False), "dense": dict(prefix_layout="dense"), "kv": dict(prefix_layout="kv"),
           "kv-1pass": dict(prefix_layout="kv")}  # kv with every prompt in one pass (before prompt bucketing)


@contextlib.contextmanager
def one_prompt_pass(on: bool):
    """kv-1pass: the kv layout as it was before prompts were cut into passes by length."""
    import posttrain.train.prefix_kv as pk

    real = pk.split_passes
    if on:
        pk.split_passes = lambda lengths, prefix, *a, **k: (
            [0, len(lengths)] if prefix == 0 else real(lengths, prefix, *a, **k))
    try:
        yield
    finally:
        pk.split_passes = real


def grpo_batch(prompts: int, group: int, mean: int, vocab: tuple[int, int], seed: int = 0,
               prompt_tokens: tuple[int, int] = (10, 40), long_prompt: int = 0) -> list[Trajectory]:
    """`prompts` groups of `group` samples; prompt lengths uniform in `prompt_tokens`, except
    that the first prompt has `long_prompt` tokens when that is set (a real batch's outlier)."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = vocab
    out = []
    for p in range(prompts):
        plen = int(torch.randint(prompt_tokens[0], prompt_tokens[1] + 1, (1,), generator=g))
        plen = long_prompt if p == 0 and long_prompt else plen
        prompt = tuple(torch.randint(lo, hi, (plen,), generator=g).tolist())
        for k in range(group):
            n = int(torch.randint(max(1, mean // 2), max(2, 3 * mean // 2 + 1), (1,), generator=g))
            toks = tuple(torch.randint(lo, hi, (n,), generator=g).tolist())
            lps = tuple((-torch.rand(n, generator=g) * 3).tolist())
            out.append(Trajectory(f"t{p}", "v", "d", prompt, (Turn("assistant", "", toks, lps),), group=p, sample=k))
    return out


def step_seconds(model, opt, trajs, adv, layout: str, pad_id: int, max_tokens: int, micro_tokens: int = 0) -> float:
    cfg = RLConfig(max_new_tokens=max_tokens, micro_tokens=micro_tokens, **LAYOUTS[layout])
    with one_prompt_pass(layout == "kv-1pass"):
        t0 = time.perf_counter()
        update_policy(model, opt, trajs, adv, cfg, pad_id)
        return time.perf_counter() - t0


def compare(model, trajs, layouts, pad_id: int, repeats: int, max_tokens: int, lr: float = 1e-6,
            micro_tokens: int = 0) -> dict[str, float]:
    """Median seconds per step for each layout, interleaved so load changes hit all alike."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    adv = torch.randn(len(trajs))
    times: dict[str, list[float]] = {k: [] for k in layouts}
    for r in range(repeats + 1):
        for k in layouts:
            s = step_seconds(model, opt, trajs, adv, k, pad_id, max_tokens, micro_tokens)
            if r:
                times[k].append(s)
    return {k: statistics.median(v) for k, v in times.items()}


def auto_pick(model, trajs, pad_id: int) -> str:
    """The layout rl.prefix_layout=auto (the default) chooses for this batch."""
    from posttrain.train.prefix_kv import PrefixKVBatch, shared_layout

    sb = shared_layout("auto", model, trajs, 1, pad_id)
    return "kv" if isinstance(sb, PrefixKVBatch) else "dense"


def table(repeats: int, groups=(4, 8, 16), means=(6, 29, 86)) -> None:
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(TinyModelConfig())
    vocab = (len(tok) - 97, len(tok))  # the printable characters
    print("| G \\ mean tokens | layout | " + " | ".join(map(str, means)) + " |")
    print("|---|---|" + "---:|" * len(means))
    rows: dict[int, dict[str, list[str]]] = {}
    for G in groups:
        rows[G] = {k: [] for k in ["plain", "dense", "kv"] + ["dense / kv", "plain / kv", "auto picks"]}
        for m in means:
            trajs = grpo_batch(16, G, m, vocab, seed=G * 100 + m)
            t = compare(model, trajs, ["plain", "dense", "kv"], tok.pad_token_id, repeats, 3 * m // 2 + 1)
            for k, v in t.items():
                rows[G][k].append(f"{v:.3f}")
            rows[G]["dense / kv"].append(f"{t['dense'] / t['kv']:.2f}x")
            rows[G]["plain / kv"].append(f"{t['plain'] / t['kv']:.2f}x")
            rows[G]["auto picks"].append(auto_pick(model, trajs, tok.pad_token_id))
        for k, cells in rows[G].items():
            print(f"| {G} | {k} | " + " | ".join(cells) + " |", flush=True)


def smollm2(repeats: int, path: Path, lora: bool, prompts: int, group: int, mean: int,
            layouts: list[str], prompt_tokens: tuple[int, int], long_prompt: int, micro_tokens: int) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    if (path / "config.json").exists():
        from transformers import AutoModelForCausalLM

        model, what = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), f"weights from {path}"
    else:
        cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                          num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                          rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=0,
                          eos_token_id=0, pad_token_id=0)
        torch.manual_seed(0)
        model, what = LlamaForCausalLM(cfg), "random-init SmolLM2-135M config"
    if lora:
        from posttrain.config import LoraConfig, TrainerConfig
        from posttrain.train.lora import prepare_model

        model = prepare_model(model, TrainerConfig(lora=LoraConfig()), 0)
        what += ", LoRA r=8 on q_proj,v_proj"
    trajs = grpo_batch(prompts, group, mean, (100, 49152), seed=1, prompt_tokens=prompt_tokens,
                       long_prompt=long_prompt)
    trained = sum(len(x.token_ids) for t in trajs for x in t.turns)
    t = compare(model, trajs, layouts, 0, repeats, 3 * mean // 2 + 1, micro_tokens=micro_tokens)
    plens = sorted({len(x.prompt_ids) for x in trajs})
    print(f"{what}; {prompts} prompts x {group} samples, prompts of {plens[0]}-{plens[-1]} tokens, "
          f"{trained} completion tokens per step, rl.micro_tokens={micro_tokens}, {torch.get_num_threads()} threads; peak RSS of the process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (all layouts: time one alone for its own)")
    print("| layout | s / step | tokens trained / s | vs plain |")
    print("|---|---:|---:|---:|")
    for k in layouts:
        vs = f"{t['plain'] / t[k]:.2f}x" if "plain" in t else "-"
        print(f"| {k} | {t[k]:.2f} | {trained / t[k]:.1f} | {vs} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--groups", type=int, nargs="+", default=[4, 8, 16], help="table: group sizes G")
    ap.add_argument("--means", type=int, nargs="+", default=[6, 29, 86], help="table: mean completion tokens")
    ap.add_argument("--smollm2", action="store_true", help="tokens trained per second on SmolLM2-135M instead")
    ap.add_argument("--lora", action="store_true", help="--smollm2: LoRA instead of full fine-tuning")
    ap.add_argument("--prompts", type=int, default=4, help="--smollm2: prompts per step")
    ap.add_argument("--group", type=int, default=8, help="--smollm2: samples per prompt")
    ap.add_argument("--mean-tokens", type=int, default=64, help="--smollm2: mean completion tokens")
    ap.add_argument("--layouts", nargs="+", default=["plain", "dense", "kv"], choices=list(LAYOUTS),
                    help="--smollm2: layouts to time")
    ap.add_argument("--prompt-tokens", type=int, nargs=2, default=[10, 40], metavar=("LO", "HI"),
                    help="--smollm2: prompt lengths, uniform in [LO, HI]")
    ap.add_argument("--long-prompt", type=int, default=0,
                    help="--smollm2: the first prompt has this many tokens (an IFBench outlier is 2,591)")
    ap.add_argument("--micro-tokens", type=int, default=0, help="--smollm2: rl.micro_tokens (0: one backward)")
    ap.add_argument("--model-dir", type=Path, default=Path("models/smollm2"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch {torch.__version__}, "
          f"{a.threads} threads, load {os.getloadavg()[0]:.1f}")
    if a.smollm2:
        smollm2(a.repeats, a.model_dir, a.lora, a.prompts, a.group, a.mean_tokens, a.layouts, tuple(a.prompt_tokens),
                a.long_prompt, a.micro_tokens)
    else:
        table(a.repeats, a.groups, a.means)
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
