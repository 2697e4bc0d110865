"""The scaling plan of docs/scaling.md ("Sharded training"), computed from the communication and
memory model that benchmarks/sharded_train.py checks against measured bytes.

    .venv/bin/python benchmarks/scaling_plan.py [--tokens 1048576] [--mfu 0.4]

Per model and mesh on nodes of 8 x H200 (141 GB HBM, 989 TFLOP/s dense bf16, NVLink 450
GB/s per GPU per direction, 8 x 400 Gb/s InfiniBand = 50 GB/s per GPU), for one optimizer
step of --tokens tokens (sequences of 4,096):
  memory/GPU  = 16 B per parameter / (GPUs that shard it)   fp32 master + fp32 grad + AdamW's 2 moments
              + 2 layers of gathered bf16 weights (the one computing, the one prefetched)
              + activations with per-layer checkpointing: each layer's bf16 input, plus one
                layer's recompute (34 * hidden * tokens bytes, Korthikanti et al.), both / tp
  FSDP bytes  = (dp-1)/dp * (2 gathers x 2 B + 1 reduce-scatter x 4 B) * P / tp, per micro-batch
  TP bytes    = 2 (tp-1)/tp * tokens * hidden * 2 B * 7 all-reduces per layer (HF's unfused q/k/v and
                gate/up under ColwiseParallel; 4 with them fused)
  MoE (EP)    = 2 all-to-alls forward + 2 backward of the routed tokens (top-k copies of hidden * 2 B)
  step time   = max(compute, FSDP time) + TP time + EP time; compute = 6 * active params * tokens
                / (GPUs * peak * --mfu); FSDP overlaps with compute (prefetch), TP and EP sit on the
                critical path; bandwidth: NVLink within a node, InfiniBand across.
The FSDP and TP terms are those of posttrain/parallel/accounting.py (measured within
10% on CPU); the EP term and the bandwidths are assumptions, not measured here.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

HBM, PEAK, NVLINK, IB = 141e9, 989e12, 450e9, 50e9


@dataclass(frozen=True)
class Model:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    inter: int
    vocab: int
    experts: int = 0
    top_k: int = 0
    expert_inter: int = 0

    def attn(self) -> int:
        hd = self.hidden // self.heads
        return 2 * self.hidden * self.heads * hd + 2 * self.hidden * self.kv_heads * hd

    def layer_dense(self) -> int:
        return self.attn() + (0 if self.experts else 3 * self.hidden * self.inter) + 2 * self.hidden

    def layer_experts(self) -> int:
        return self.experts * 3 * self.hidden * self.expert_inter

    def total(self) -> int:
        return self.layers * (self.layer_dense() + self.layer_experts()) + 2 * self.vocab * self.hidden

    def active(self) -> int:
        act = self.top_k * 3 * self.hidden * self.expert_inter if self.experts else 0
        return self.layers * (self.layer_dense() + act) + 2 * self.vocab * self.hidden


MODELS = [Model("7B (Llama-2-7B shape)", 4096, 32, 32, 32, 11008, 32000),
          Model("70B (Llama-3-70B shape)", 8192, 80, 64, 8, 28672, 128256),
          Model("235B MoE (Qwen3-235B-A22B shape)", 4096, 94, 64, 4, 0, 151936, experts=128, top_k=8,
                expert_inter=1536)]

# (model index, nodes, tp, ep, micro-batch sequences per GPU)
PLANS = [(0, 1, 1, 1, 4), (0, 4, 1, 1, 4), (1, 1, 8, 1, 1), (1, 2, 8, 1, 2), (1, 4, 8, 1, 2), (1, 8, 8, 1, 2),
         (2, 4, 1, 8, 2), (2, 8, 1, 8, 2), (2, 16, 1, 8, 2)]


def plan(m: Model, nodes: int, tp: int, ep: int, micro: int, tokens: int, seq: int, mfu: float) -> dict:
    gpus = nodes * 8
    dp = gpus // tp
    dense_p = m.total() - m.layers * m.layer_experts()
    expert_p = m.layers * m.layer_experts()
    state = 16 * dense_p / gpus + 16 * expert_p / gpus  # experts: EP within a node x FSDP across nodes
    gathered = 2 * 2 * (m.layer_dense() / tp + m.layer_experts() / ep)
    seqs_per_gpu = tokens / seq / dp
    m_tokens = micro * seq
    act = (2 * m.hidden * m.layers * m_tokens + 34 * m.hidden * m_tokens) / tp
    mem = state + gathered + act
    n_micro = max(1.0, seqs_per_gpu / micro)
    f = (dp - 1) / dp
    cross = dp > 8 // tp or ep > 1 and nodes > 1
    fsdp_dense = n_micro * f * 8 * dense_p / tp
    fsdp_exp = n_micro * ((nodes - 1) / nodes if ep > 1 else f) * 8 * expert_p / ep if expert_p else 0.0
    fsdp_b = fsdp_dense + fsdp_exp
    tp_b = n_micro * 2 * (tp - 1) / tp * m_tokens * m.hidden * 2 * 7 * m.layers if tp > 1 else 0.0
    ep_b = n_micro * 4 * m_tokens * m.top_k * m.hidden * 2 * (ep - 1) / ep * m.layers if ep > 1 else 0.0
    compute = 6 * m.active() * tokens / (gpus * PEAK * mfu)
    t_fsdp = fsdp_b / (IB if cross else NVLINK)
    step = max(compute, t_fsdp) + tp_b / NVLINK + ep_b / NVLINK
    return {"gpus": gpus, "mesh": f"dp{dp}" + (f" x tp{tp}" if tp > 1 else "") + (f" (ep{ep} in-node)" if ep > 1 else ""),
            "mem": mem, "fits": mem < 0.9 * HBM, "fsdp": fsdp_b, "tp": tp_b, "ep": ep_b, "compute": compute,
            "t_fsdp": t_fsdp, "step": step}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1 << 20)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--mfu", type=float, default=0.4)
    a = ap.parse_args()
    print(f"{a.tokens:,} tokens per step ({a.tokens // a.seq} x {a.seq}), compute at {a.mfu:.0%} MFU, H200 nodes of 8")
    print("| model | params (active) | GPUs | mesh | micro | memory/GPU GB | fits | FSDP GB/GPU | TP GB/GPU "
          "| EP GB/GPU | compute s | FSDP s | step s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mi, nodes, tp, ep, micro in PLANS:
        m = MODELS[mi]
        r = plan(m, nodes, tp, ep, micro, a.tokens, a.seq, a.mfu)
        print(f"| {m.name} | {m.total() / 1e9:.1f}B ({m.active() / 1e9:.1f}B) | {r['gpus']} | {r['mesh']} | {micro} | "
              f"{r['mem'] / 1e9:.0f} | {'yes' if r['fits'] else 'no'} | {r['fsdp'] / 1e9:.1f} | {r['tp'] / 1e9:.1f} | "
              f"{r['ep'] / 1e9:.1f} | {r['compute']:.2f} | {r['t_fsdp']:.2f} | {r['step']:.2f} |")


if __name__ == "__main__":
    main()
