"""The physical floor of one decode step, next to HF's forward and `fast`'s decode step.

    .venv/bin/python benchmarks/decode_floor.py [--threads 2] [--batches 1 64] [--context 192] [--repeats 7]

On a SmolLM2-135M-sized Llama (random init; real weights when --model-dir holds an HF
checkpoint), fp32. One decode step of B rows at context C must at least
- read every matmul weight once (q|k|v, o, gate|up, down in 30 layers, and the 49,152 x 576
  tied LM head): `weight bytes`;
- read each row's cached keys and values, 2 x layers x kv_heads x C x head_dim floats per
  row: `KV bytes`;
- do 2 x (matmul weights) x B FLOPs plus the attention's 4 x heads x head_dim x C x B.
The floor is max(bytes / bandwidth, FLOPs / matmul rate), with both rates measured here,
now, with the same thread count: bandwidth as the best of a few sums over a 512 MiB tensor
(read only, as decode reads weights and KV) and a copy of it (read + write, reported), the
matmul rate as the best of a few 2048 x 2048 x 2048 fp32 products.

Timed (medians of --repeats):
- `hf forward (cache)`: HF's own forward of B single tokens with a DynamicCache of C
  positions, i.e. a real HF decode step without sampling;
- `hf forward (no cache)`: B single tokens, no cache (the floor rollout_bench.py uses);
- `fast step`: FastLM.forward of B single tokens over lanes of C positions plus its logits
  (the fused C kernel when it builds), i.e. `fast`'s decode step without sampling.

Then the step's sampling, timed apart: one token per row at temperature 1 from those logits, by
the C sampler and by the tensor path (same draws), against reading B x vocab fp32 logits once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch


def best_of(fn, repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def median_of(fn, repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def machine_rates(repeats: int) -> dict[str, float]:
    """Read and copy bandwidth (GB/s) over a 512 MiB fp32 tensor; fp32 matmul GFLOP/s."""
    x = torch.ones(128 * 2**20)  # 512 MiB
    y = torch.empty_like(x)
    nbytes = x.numel() * 4
    read = nbytes / best_of(lambda: x.sum(), repeats) / 1e9
    copy = 2 * nbytes / best_of(lambda: y.copy_(x), repeats) / 1e9
    del x, y
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    mm = 2 * n**3 / best_of(lambda: a @ b, repeats) / 1e9
    return dict(read_gbs=read, copy_gbs=copy, matmul_gflops=mm)


def load_model(path: Path):
    from transformers import LlamaConfig, LlamaForCausalLM

    if (path / "config.json").exists():
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), f"weights from {path}"
    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval(), "random-init SmolLM2-135M config"


def step_work(cfg, batch: int, context: int) -> dict[str, float]:
    """Bytes and FLOPs one decode step of `batch` rows at `context` cached positions must move/do."""
    h, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    heads, kvh = cfg.num_attention_heads, cfg.num_key_value_heads
    d = getattr(cfg, "head_dim", None) or h // heads
    per_layer = h * (heads + 2 * kvh) * d + heads * d * h + 3 * h * inter  # q|k|v, o, gate|up, down
    weights = layers * per_layer + cfg.vocab_size * h  # + the LM head
    kv = 2 * layers * kvh * context * d * batch
    flops = 2 * weights * batch + 4 * layers * heads * d * context * batch
    return dict(weight_bytes=4.0 * weights, kv_bytes=4.0 * kv, flops=float(flops))


def hf_cached_step(model, batch: int, context: int):
    from transformers import DynamicCache

    cfg = model.config
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv = [(torch.randn(batch, cfg.num_key_value_heads, context, d), torch.randn(batch, cfg.num_key_value_heads, context, d))
          for _ in range(cfg.num_hidden_layers)]
    ids = torch.randint(100, cfg.vocab_size, (batch, 1))
    pos = torch.full((batch, 1), context)

    cache = DynamicCache(kv)
    del kv

    def run():
        with torch.inference_mode():
            model(input_ids=ids, position_ids=pos, cache=cache, use_cache=True)  # appends one, as HF decode does
        cache.crop(-1)  # back to `context` positions (a view)
    return run


def hf_nocache_step(model, batch: int):
    ids = torch.randint(100, model.config.vocab_size, (batch, 1))

    def run():
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False)
    return run


def fast_step(model, batch: int, context: int):
    from posttrain.rollout.engines.fast.model import FastLM

    lm = FastLM.from_hf(model, max_len=context + 8)
    lanes = lm.new_lanes(batch, context + 8)
    ids = torch.randint(100, model.config.vocab_size, (batch, 1))
    start = torch.full((batch,), context, dtype=torch.long)

    def run():
        with torch.inference_mode():
            lm.logits(lm.forward(ids, start, lanes)[:, -1])
    return run


def sampler_times(model, batch: int, context: int, repeats: int) -> tuple[float, float]:
    """Seconds to draw one token per row at temperature 1 from `fast`'s logits of `batch` rows:
    the C sampler (cpu_kernels.sample_rows) and the tensor path (sampling.tensor_path), same draws."""
    from posttrain.rollout.engines.fast import sampling
    from posttrain.rollout.engines.fast.model import FastLM

    lm = FastLM.from_hf(model, max_len=context + 8)
    ids = torch.randint(100, model.config.vocab_size, (batch, 1), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        logits = lm.logits(lm.forward(ids, torch.full((batch,), context), lm.new_lanes(batch, context + 8))[:, -1])
    rp = sampling.RowParams.build([1.0] * batch, [1.0] * batch, [0] * batch, list(range(batch)), [0] * batch,
                                  logits.device)
    pos = torch.arange(batch)
    c = median_of(lambda: sampling.sample(logits, rp, pos), repeats)
    with sampling.tensor_path():
        t = median_of(lambda: sampling.sample(logits, rp, pos), repeats)
    return c, t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--context", type=int, default=192, help="cached positions (a 64-token prompt + 128 new)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--model-dir", type=Path, default=Path("models/smollm2"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch {torch.__version__}, {a.threads} threads, "
          f"load {os.getloadavg()[0]:.1f}")
    rates = machine_rates(a.repeats)
    print(f"# read {rates['read_gbs']:.1f} GB/s, copy {rates['copy_gbs']:.1f} GB/s (read+write), "
          f"matmul {rates['matmul_gflops']:.0f} GFLOP/s")
    model, what = load_model(a.model_dir)
    from posttrain.rollout.engines.fast import cpu_kernels

    print(f"# {what}, context {a.context}, fast C kernels: {cpu_kernels.available()}")
    print("| B | weight MB | KV MB | bytes floor ms | FLOP floor ms | floor ms | hf forward (cache) ms | "
          "hf forward (no cache) ms | fast step ms | fast / floor | hf cache / floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in a.batches:
        w = step_work(model.config, b, a.context)
        bytes_ms = (w["weight_bytes"] + w["kv_bytes"]) / (rates["read_gbs"] * 1e9) * 1e3
        flop_ms = w["flops"] / (rates["matmul_gflops"] * 1e9) * 1e3
        floor = max(bytes_ms, flop_ms)
        hf_c = median_of(hf_cached_step(model, b, a.context), a.repeats) * 1e3
        hf_n = median_of(hf_nocache_step(model, b), a.repeats) * 1e3
        fast = median_of(fast_step(model, b, a.context), a.repeats) * 1e3
        print(f"| {b} | {w['weight_bytes'] / 1e6:.0f} | {w['kv_bytes'] / 1e6:.1f} | {bytes_ms:.1f} | {flop_ms:.1f} | "
              f"{floor:.1f} | {hf_c:.1f} | {hf_n:.1f} | {fast:.1f} | {fast / floor:.2f}x | {hf_c / floor:.2f}x |",
              flush=True)
    print("\nSampling one token per row at temperature 1 from those logits (B x vocab fp32; floor: reading them once)")
    print("| B | C sampler ms | tensor sampler ms | read floor ms |")
    print("|---:|---:|---:|---:|")
    for b in a.batches:
        c, t = sampler_times(model, b, a.context, a.repeats)
        floor = b * model.config.vocab_size * 4 / (rates["read_gbs"] * 1e9) * 1e3
        print(f"| {b} | {c * 1e3:.2f} | {t * 1e3:.2f} | {floor:.2f} |", flush=True)
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
