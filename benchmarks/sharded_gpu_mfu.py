"""MFU of one FSDP2 training step at world size 1 on NCCL, on a 0.5B-shape model (GPU only).

    timeout 900 .venv/bin/python benchmarks/sharded_gpu_mfu.py [--steps 10] [--batch 16] [--seq 2048]

Prepared, not yet run here (this machine has no GPU). What it does, in one process:
  1. joins a one-rank NCCL process group with a 120 s timeout (trainer.timeout_s), builds a
     ("dp",) mesh of 1, and a Qwen2-0.5B-shape Llama (hidden 896, 24 layers, 14 heads, 2 kv
     heads, MLP 4864, vocab 151,936, tied embeddings) from its config, random weights;
  2. shards it with posttrain's wrap.shard_in_place (fully_shard per layer and root,
     MixedPrecisionPolicy bf16 params / fp32 reduce), optional activation checkpointing;
  3. times --steps AdamW steps on --batch x --seq random tokens (causal LM loss, sdpa),
     after 2 warm-up steps, with CUDA events;
  4. prints MFU = 6 * N_params * tokens / step_time / peak, plus the attention FLOPs
     (12 * layers * hidden * seq per token: the "6N + attention" convention), against the
     H200's dense bf16 peak (989 TFLOP/s; --peak to change).
Reference: a plain HF training loop reached 31% at 16 x 2048 tokens on an H200; goal 45%.
Every phase prints as it goes, and an overall alarm stops it after --timeout-s, so a
stuck run leaves time to rerun.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def qwen05_config(vocab: int = 151_936):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=vocab, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
                       tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1_000_000.0,
                       attn_implementation="sdpa")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--micro", type=int, default=4, help="sequences per micro-batch (grad accumulation)")
    ap.add_argument("--ac", action="store_true", help="activation checkpointing per layer")
    ap.add_argument("--compile", action="store_true", help="torch.compile each decoder layer")
    ap.add_argument("--peak", type=float, default=989e12, help="dense bf16 FLOP/s of one GPU")
    ap.add_argument("--timeout-s", type=int, default=480)
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, lambda *_: (print("sharded_gpu_mfu: timed out", flush=True), os._exit(124)))
    signal.alarm(args.timeout_s)

    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    from posttrain.parallel.mesh import build_mesh
    from posttrain.parallel.wrap import ShardOptions, shard_in_place

    if not torch.cuda.is_available():
        raise SystemExit("sharded_gpu_mfu: needs a CUDA GPU")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
    mesh = build_mesh(1, 1)
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(qwen05_config(), dtype=torch.float32)
    shard_in_place(model, mesh, ShardOptions(mixed_precision="bf16", activation_checkpointing=args.ac))
    if args.compile:
        for layer in model.model.layers:
            layer.compile()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.1f}M parameters, built+sharded in {time.perf_counter() - t0:.1f}s", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(0, 151_936, (args.batch, args.seq), device="cuda", generator=g)
    accum = max(1, args.batch // args.micro)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for k in range(accum):
            mb = ids[k * args.micro:(k + 1) * args.micro]
            loss = model(input_ids=mb, labels=mb).loss / accum
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return total

    for i in range(2):
        print(f"warm-up {i}: loss {step():.3f}", flush=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        step()
    end.record()
    torch.cuda.synchronize()
    step_s = start.elapsed_time(end) / 1e3 / args.steps
    tokens = args.batch * args.seq
    c = model.config
    flops_6n = 6 * n_params * tokens
    flops_attn = 12 * c.num_hidden_layers * c.hidden_size * args.seq * tokens // 2  # causal: half the matrix
    mfu = (flops_6n + flops_attn) / step_s / args.peak
    mem = torch.cuda.max_memory_allocated() / 2**30
    print(f"step {step_s * 1e3:.1f} ms, {tokens / step_s:,.0f} tokens/s, MFU {mfu * 100:.1f}% "
          f"(6N only: {flops_6n / step_s / args.peak * 100:.1f}%), peak memory {mem:.1f} GiB, "
          f"batch {args.batch}x{args.seq}, micro {args.micro}, ac {args.ac}, compile {args.compile}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
