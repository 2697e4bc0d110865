"""GPU rollout throughput: hf (dynamic cache), hf (static cache) and fast, one script, <= 5 min.

    python benchmarks/gpu_rollout.py            # H200: Qwen2-0.5B shape, bf16, batch 256
    python benchmarks/gpu_rollout.py --smoke    # CPU, tiny shape: checks the script's logic

Model: random-init Qwen2 of Qwen2-0.5B shape (hidden 896, 24 layers, 14 heads, 2 KV
heads, intermediate 4864, vocab 151,936, tied embeddings) in bf16. Workload: batch 256,
128-token prompts, 256 new tokens forced (EOS ignored), greedy. Reference points (H200,
transformers 5.x): generate dynamic cache 2,730 tok/s, static cache 16,755 tok/s;
target for fast >= 40,000 tok/s.

Achieved memory bandwidth = bytes a decode step must read (all weights once, the tied
embedding as the LM head, plus the KV cache at the average context) x decode steps /
decode time, against the card's ~4.3 TB/s. Also reports the bf16 logprob tolerance:
max |fast logprob - HF full-sequence recomputation| on a few sequences.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QWEN05 = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
              intermediate_size=4864, vocab_size=151936)
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=300)


def word_tokenizer(vocab: int):
    """A real fast tokenizer with `vocab` entries (t0, t1, ...), EOS = t1, PAD = t0."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t2"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="t0", eos_token="t1", unk_token="t2")


def build(shape: dict, dtype: torch.dtype, device: str, max_pos: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**shape, max_position_embeddings=max_pos, tie_word_embeddings=True, rope_theta=1e6)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(dtype).eval()
    return model


def step_bytes(model, batch: int, avg_ctx: float) -> float:
    """Bytes one decode step must read: every weight once + the KV cache at avg context."""
    c = model.config
    elt = next(model.parameters()).element_size()
    weights = sum(p.numel() for p in model.parameters()) * elt
    kv = batch * avg_ctx * c.num_hidden_layers * 2 * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * elt
    return weights + kv


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_hf(model, ids, new: int, device: str, static: bool) -> float:
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
    if static:
        kw["cache_implementation"] = "static"
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        model.generate(input_ids=ids[:, :8], attention_mask=mask[:, :8], **{**kw, "max_new_tokens": 4,
                                                                            "min_new_tokens": 4})
        sync(device)
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, **kw)
        sync(device)
    assert out.shape[1] == ids.shape[1] + new
    return time.perf_counter() - t0


def run_fast(model, tok, ids, new: int, device: str, graphs: bool):
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.rollout.engines.fast.engine import FastEngine

    eng = FastEngine(model, tok, max_batch=ids.shape[0], device=device, cuda_graphs=graphs, ignore_eos=True,
                     cache_outputs=False)
    reqs = [GenRequest(tuple(r), SamplingParams(temperature=0.0, max_new_tokens=new)) for r in ids.tolist()]
    eng.generate(reqs)  # warm-up: compiles every batch bucket the run will use
    sync(device)
    c0 = dict(eng.counters)
    t0 = time.perf_counter()
    outs = eng.generate(reqs)
    sync(device)
    wall = time.perf_counter() - t0
    assert all(len(o.token_ids) == new for o in outs)
    decode_s = eng.counters["decode_s"] - c0["decode_s"]
    steps = eng.counters["decode_steps"] - c0["decode_steps"]
    return wall, decode_s, steps, outs, reqs


def logprob_tolerance(model, reqs, outs, k: int = 4) -> float:
    worst = 0.0
    for r, o in list(zip(reqs, outs))[:k]:
        ids = torch.tensor([list(r.prompt_ids) + list(o.token_ids)], device=model.device)
        with torch.inference_mode():
            lp = model(ids).logits.float().log_softmax(-1)[0, len(r.prompt_ids) - 1:-1]
        ref = lp.gather(-1, torch.tensor(o.token_ids, device=model.device)[:, None])[:, 0].cpu()
        worst = max(worst, (ref - torch.tensor(o.logprobs)).abs().max().item())
    return worst


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny shape on CPU, a few tokens")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--skip-hf-dynamic", action="store_true")
    a = ap.parse_args(argv)
    if a.smoke:
        shape, device, dtype, a.batch, a.prompt, a.new = SMOKE, "cpu", torch.float32, 4, 8, 6
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --smoke for the CPU check")
        shape, device, dtype = QWEN05, "cuda", torch.bfloat16
    model = build(shape, dtype, device, max_pos=max(512, a.prompt + a.new + 16))
    tok = word_tokenizer(shape["vocab_size"])
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, shape["vocab_size"], (a.batch, a.prompt), generator=g).to(device)
    tokens = a.batch * a.new
    res: dict = {}
    if not a.skip_hf_dynamic:
        res["hf_dynamic_tps"] = tokens / run_hf(model, ids, a.new, device, static=False)
    res["hf_static_tps"] = tokens / run_hf(model, ids, a.new, device, static=True)
    wall, decode_s, steps, outs, reqs = run_fast(model, tok, ids.cpu(), a.new, device, graphs=device == "cuda")
    res["fast_tps"] = tokens / wall
    res["fast_decode_step_ms"] = decode_s / steps * 1e3
    bw = step_bytes(model, a.batch, a.prompt + a.new / 2) * steps / decode_s
    res["fast_bandwidth_TBps"] = bw / 1e12
    res["fast_bandwidth_frac_4.3TBps"] = bw / 4.3e12
    res["logprob_max_abs_diff"] = logprob_tolerance(model, reqs, outs)
    print(f"device={device} dtype={dtype} batch={a.batch} prompt={a.prompt} new={a.new}")
    print("| metric | value |\n|---|---|")
    for k, v in res.items():
        print(f"| {k} | {v:.4g} |")
    return res


if __name__ == "__main__":
    main()
