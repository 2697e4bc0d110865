"""Rollout engines side by side: `hf` (transformers generate) vs `fast`, plus speculation.

    .venv/bin/python benchmarks/rollout_bench.py [--repeats 3] [--threads 1] [--quick]
    .venv/bin/python benchmarks/rollout_bench.py --smollm2 [--repeats 1] [--threads 2]

Everything runs in one process on the tiny default model (build_tiny, fp32), engines
interleaved per repeat, medians reported. The compute floor is measured in the same run:
the model's own HF forward over a batch of single tokens, no cache, no sampling. `fast`
is also run without its C kernels (rollout/engines/fast/cpu_kernels.py) to show what they add.

Regimes (GRPO-shaped: P prompts x group 8, prompts of 16-48 tokens, 64 new tokens,
temperature 1):
  overhead-bound  P = 8   (64 sequences)   target: fast >= 4x hf tokens/s
  compute-bound   P = 64  (512 sequences)  target: fast >= 2x hf, decode step <= 1.3x floor
Speculative decoding (greedy, 8 requests, batch 8): an extraction workload whose answer
is a verbatim span of the prompt, on a copy of the tiny model trained for a few hundred
steps to copy (so prompt lookup's proposals are the model's own choices, not luck); the
draft is a 1-layer, 64-wide model trained on the same task. Reports speed-up over plain
`fast` and the acceptance rate.

`--smollm2` (its own row, nothing else runs): a SmolLM2-135M-sized Llama (576 hidden, 30
layers, 9 heads / 3 KV heads, 1536 MLP, 49152 vocabulary, tied embeddings; random init,
or real weights when --model-dir, default models/smollm2, holds an HF checkpoint), fp32, 2 threads,
64 rollouts (8 prompts x group 8, prompts of 16-48 tokens) of exactly 128 new tokens at
temperature 1, logprobs kept. `fast` against transformers `generate` with a static cache
(`cache_implementation="static"`, EOS suppressed by min_new_tokens), interleaved in one run,
each in fp32 and in bf16 (HF: the whole model in bf16; `fast`: `matmul_dtype="bfloat16"`, the
weight matmuls in bf16 and everything else fp32), with the bf16 logprobs' gap to fp32.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.config import TinyModelConfig  # noqa: E402
from posttrain.models.tiny import build_tiny  # noqa: E402
from posttrain.rollout.engine import GenRequest, SamplingParams  # noqa: E402
from posttrain.rollout.engines.fast.engine import FastEngine  # noqa: E402
from posttrain.rollout.engines.hf import HFEngine  # noqa: E402

ALPHA = "abcdefghijklmnopqrstuvwxyz0123456789"


def grpo_requests(tok, prompts: int, group: int, new: int, seed: int = 0) -> list[GenRequest]:
    g = torch.Generator().manual_seed(seed)
    reqs = []
    for i in range(prompts):
        L = int(torch.randint(16, 49, (1,), generator=g))
        text = "".join(ALPHA[j] for j in torch.randint(0, len(ALPHA), (L,), generator=g).tolist())
        reqs.append(GenRequest(tuple(tok.encode(text)), SamplingParams(temperature=1.0, max_new_tokens=new, n=group,
                                                                       seed=i), id=str(i)))
    return reqs


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def floor_ms(model, batch: int, repeats: int = 9) -> float:
    ids = torch.randint(11, 100, (batch, 1))
    with torch.inference_mode():
        model(ids, use_cache=False)
        ts = [timed(lambda: model(ids, use_cache=False))[0] for _ in range(repeats)]
    return statistics.median(ts) * 1e3


def regime(model, tok, name: str, prompts: int, repeats: int) -> dict:
    reqs = grpo_requests(tok, prompts, 8, 64)
    hf = HFEngine(model, tok, max_batch=512)
    fast = FastEngine(model, tok, max_batch=512)
    tensor = FastEngine(model, tok, max_batch=512)  # the same engine without the C kernels (cpu_kernels.py)
    tensor.lm.fused_decode = False
    fast.generate(reqs[:1])  # warm-up: lanes allocated, first-call paths taken
    hf.generate(reqs[:1])
    without_kernels(lambda: tensor.generate(reqs[:1]))
    rows = {"hf": [], "fast": []}
    steps, floors, tensor_steps = [], [], []
    for _ in range(repeats):  # engines and floor interleaved, so load drift hits all alike
        dt, outs = timed(lambda: hf.generate(reqs))
        rows["hf"].append((dt, sum(len(o.token_ids) for o in outs)))
        floors.append(floor_ms(model, prompts * 8))
        before = dict(fast.counters)
        dt, outs = timed(lambda: fast.generate(reqs))
        rows["fast"].append((dt, sum(len(o.token_ids) for o in outs)))
        n = fast.counters["decode_steps"] - before["decode_steps"]
        steps.append((fast.counters["decode_s"] - before["decode_s"]) / n * 1e3)
        floors.append(floor_ms(model, prompts * 8))
        before = dict(tensor.counters)
        without_kernels(lambda: tensor.generate(reqs))
        n = tensor.counters["decode_steps"] - before["decode_steps"]
        tensor_steps.append((tensor.counters["decode_s"] - before["decode_s"]) / n * 1e3)
    res = {"name": name, "seqs": prompts * 8, "floor_ms": statistics.median(floors)}
    for k, v in rows.items():
        res[k + "_tps"] = statistics.median(t / s for s, t in v)
        res[k + "_tokens"] = statistics.median(t for _, t in v)
        res[k + "_wall"] = statistics.median(s for s, _ in v)
    res["hf_step_ms"] = res["hf_wall"] * 1e3 / 64  # generate runs 64 steps (prefill included)
    res["fast_step_ms"] = statistics.median(steps)
    # per repeat: fast's step over the mean of the floors measured just before and after it
    res["fast_floor_ratio"] = statistics.median(st / ((floors[2 * i] + floors[2 * i + 1]) / 2)
                                                for i, st in enumerate(steps))
    res["tensor_step_ms"] = statistics.median(tensor_steps)
    res["tensor_floor_ratio"] = statistics.median(st / ((floors[2 * i] + floors[2 * i + 1]) / 2)
                                                  for i, st in enumerate(tensor_steps))
    res["hit_rate"] = fast.stats()["prefix_cache_hit_rate"]
    state = model.state_dict()
    syncs = [fast.load_weights(state, version=v + 1).total_s for v in range(5)]
    res["sync_ms"] = statistics.median(syncs) * 1e3
    res["sync_frac"] = res["sync_ms"] / 1e3 / res["fast_wall"]
    return res


def without_kernels(fn):
    """Run fn with sampling on the tensor path too (the engine's attention is switched per engine)."""
    from posttrain.rollout.engines.fast.sampling import tensor_path

    with tensor_path():
        return fn()


def copy_batch(tok, n: int, g: torch.Generator) -> tuple[list[list[int]], list[int]]:
    """'<record>|' prompts whose answer is the record's 40 characters verbatim, then EOS."""
    rows, starts = [], []
    for _ in range(n):
        doc = "".join(ALPHA[j] for j in torch.randint(0, 26, (40,), generator=g).tolist())
        prompt = tok.encode(f"{doc}|")
        rows.append(prompt + tok.encode(doc) + [tok.eos_token_id])
        starts.append(len(prompt))
    return rows, starts


def train_copy(cfg: TinyModelConfig, tok, steps: int, seed: int):
    """A few hundred Adam steps on the copy task (loss on the answer only)."""
    model, _ = build_tiny(cfg, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        rows, starts = copy_batch(tok, 32, g)
        W = max(len(r) for r in rows)
        ids = torch.tensor([r + [tok.pad_token_id] * (W - len(r)) for r in rows])
        labels = ids.clone()
        for i, (r, s) in enumerate(zip(rows, starts)):
            labels[i, :s] = -100
            labels[i, len(r):] = -100
        loss = model(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"  copy model {cfg.num_hidden_layers}L/{cfg.hidden_size}: final loss {loss.item():.3f}", flush=True)
    return model.eval()


def speculative(tok, repeats: int, steps: int) -> list[dict]:
    target = train_copy(TinyModelConfig(), tok, steps, seed=0)
    draft = train_copy(TinyModelConfig(hidden_size=64, intermediate_size=192, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=2), tok, steps, seed=1)
    rows, starts = copy_batch(tok, 8, torch.Generator().manual_seed(123))
    reqs = [GenRequest(tuple(r[:s]), SamplingParams(temperature=0.0, max_new_tokens=64)) for r, s in zip(rows, starts)]
    engines = {"fast": FastEngine(target, tok), "fast+ngram": FastEngine(target, tok, speculative="ngram", num_draft=8),
               "fast+draft": FastEngine(target, tok, speculative="draft", num_draft=4, draft_model=draft)}
    times: dict[str, list[float]] = {k: [] for k in engines}
    outs = {}
    for e in engines.values():
        e.generate(reqs[:1])
    for _ in range(repeats):
        for k, e in engines.items():
            dt, outs[k] = timed(lambda: e.generate(reqs))
            times[k].append(dt)
    ref = [o.token_ids for o in outs["fast"]]
    exact = sum(o.text == tok.decode(r[s:-1]) for o, r, s in zip(outs["fast"], rows, starts))
    res = []
    for k, e in engines.items():
        st = e.stats()
        res.append(dict(name=k, wall=statistics.median(times[k]), tokens=sum(len(t) for t in ref),
                        same=[o.token_ids for o in outs[k]] == ref, acc=st.get("spec_acceptance"),
                        per_step=st.get("spec_tokens_per_seq_step"), exact=exact))
    return res


class _IdTokenizer:
    """Token ids as text: the random-init model has no tokenizer, the engine only needs EOS and decode."""

    eos_token_id = 0
    pad_token_id = 0

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return " ".join(map(str, ids))


def smollm2_model(path: Path):
    from transformers import LlamaConfig, LlamaForCausalLM

    if (path / "config.json").exists():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(path)
        if tok.pad_token_id is None:
            tok.pad_token_id = tok.eos_token_id
        return model, tok, f"SmolLM2-135M weights from {path}"
    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval(), _IdTokenizer(), "random-init SmolLM2-135M config"


def hf_static_generate(model, tok, reqs: list[GenRequest]) -> int:
    """transformers generate with a static cache, one left-padded batch, raw logprobs as the hf
    engine computes them; returns the number of new tokens."""
    rows = [r.prompt_ids for r in reqs for _ in range(r.params.n)]
    new = reqs[0].params.max_new_tokens
    W = max(len(r) for r in rows)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (W - len(r)) + list(r) for r in rows])
    mask = torch.tensor([[0] * (W - len(r)) + [1] * len(r) for r in rows])
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                             max_new_tokens=new, min_new_tokens=new, cache_implementation="static",
                             output_logits=True, return_dict_in_generate=True, pad_token_id=pad,
                             eos_token_id=tok.eos_token_id)
        seq = out.sequences[:, W:]  # [N, new]
        lps = torch.stack(out.logits, 1).float().log_softmax(-1).gather(-1, seq[..., None])[..., 0]  # [N, new]
    assert lps.shape == seq.shape
    return seq.numel()


def smollm2_row(repeats: int, new: int = 128, path: Path = Path("models/smollm2")) -> None:
    """Four engines interleaved per repeat: HF generate (static cache) in fp32 and in bf16, `fast`
    in fp32 and with bf16 weight matmuls (`matmul_dtype`, the rest fp32)."""
    import copy

    model, tok, what = smollm2_model(path)
    half = copy.deepcopy(model).to(torch.bfloat16)  # HF's own bf16: every op in bf16
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(0)
    reqs = []
    for i in range(8):
        L = int(torch.randint(16, 49, (1,), generator=g))
        ids = tuple(torch.randint(1, vocab, (L,), generator=g).tolist())
        reqs.append(GenRequest(ids, SamplingParams(temperature=1.0, max_new_tokens=new, n=8, seed=i), id=str(i)))
    fast = FastEngine(model, tok, max_batch=64, ignore_eos=True)
    fast16 = FastEngine(model, tok, max_batch=64, ignore_eos=True, matmul_dtype="bfloat16")
    warm = [GenRequest(reqs[0].prompt_ids, SamplingParams(temperature=1.0, max_new_tokens=4, n=8, seed=0))]
    for e in (fast, fast16):
        e.generate(warm)  # warm-up: lanes allocated, kernels built
    for m in (model, half):
        hf_static_generate(m, tok, warm)
    names = ("hf static fp32", "hf static bf16", "fast fp32", "fast bf16 matmuls")
    tps: dict[str, list[float]] = {n: [] for n in names}
    steps: dict[str, list[float]] = {"fast fp32": [], "fast bf16 matmuls": []}
    floors, gap, hf_gap = [], float("nan"), float("nan")
    for _ in range(repeats):  # interleaved, so load drift hits all alike
        for name, m in (("hf static fp32", model), ("hf static bf16", half)):
            dt, n = timed(lambda: hf_static_generate(m, tok, reqs))
            tps[name].append(n / dt)
            print(f"  {name}: {dt:.1f} s for {n} tokens", flush=True)
        floors.append(floor_ms(model, 64, repeats=3))
        for name, e in (("fast fp32", fast), ("fast bf16 matmuls", fast16)):
            before = dict(e.counters)
            dt, outs = timed(lambda: e.generate(reqs))
            n = sum(len(o.token_ids) for o in outs)
            tps[name].append(n / dt)
            steps[name].append((e.counters["decode_s"] - before["decode_s"]) * 1e3
                               / (e.counters["decode_steps"] - before["decode_steps"]))
            print(f"  {name}: {dt:.1f} s for {n} tokens", flush=True)
            if name == "fast bf16 matmuls":  # its logprobs against the fp32 trainer's recompute, 4 samples
                gap = max(_recompute_gap(model, reqs[k // 8].prompt_ids, outs[k]) for k in (0, 9, 18, 27))
                hf_gap = max(_recompute_gap(model, reqs[k // 8].prompt_ids, outs[k], half) for k in (0, 9, 18, 27))
    med = {n: statistics.median(v) for n, v in tps.items()}
    print(f"{what}: torch threads {torch.get_num_threads()}, 64 rollouts x {new} new tokens, "
          f"{repeats} repeat(s), medians")
    print("| engine | tok/s | ms/step | vs hf static fp32 | vs hf static, same dtype |")
    print("|---|---:|---:|---:|---:|")
    for n in names:
        same = {"fast fp32": "hf static fp32", "fast bf16 matmuls": "hf static bf16"}.get(n, n)
        step = f"{statistics.median(steps[n]):.1f}" if n in steps else "-"
        print(f"| {n} | {med[n]:.0f} | {step} | {med[n] / med['hf static fp32']:.2f}x | {med[n] / med[same]:.2f}x |")
    best = max(med["hf static fp32"], med["hf static bf16"])
    print(f"  fast bf16 matmuls / the faster HF static: **{med['fast bf16 matmuls'] / best:.2f}x**; "
          f"fast fp32 / hf static fp32: **{med['fast fp32'] / med['hf static fp32']:.2f}x**")
    print(f"  floor: the model's own HF fp32 forward of 64 single tokens, no cache: {statistics.median(floors):.1f} ms")
    print(f"  max |logprob - fp32 recompute| over the same 4 samples x {new} tokens: fast bf16 matmuls {gap:.4f}, "
          f"HF's bf16 model {hf_gap:.4f}", flush=True)


def _logprobs(model, prompt, out) -> torch.Tensor:
    ids = torch.tensor([list(prompt) + list(out.token_ids)])
    with torch.inference_mode():
        lp = model(ids).logits.float().log_softmax(-1)[0, len(prompt) - 1:-1]  # [T, V]
    return lp.gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]


def _recompute_gap(model, prompt, out, other=None) -> float:
    """max |logprob - fp32 HF recompute| over one completion's tokens: the engine's own logprobs,
    or `other` model's recompute of the same tokens."""
    ref = _logprobs(model, prompt, out)
    got = torch.tensor(out.logprobs) if other is None else _logprobs(other, prompt, out)
    return (ref - got).abs().max().item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="default 1, 2 with --smollm2")
    ap.add_argument("--copy-steps", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="overhead regime and speculation only")
    ap.add_argument("--smollm2", action="store_true", help="only the SmolLM2-135M row: fast vs static-cache HF")
    ap.add_argument("--new-tokens", type=int, default=128, help="--smollm2: new tokens per rollout")
    ap.add_argument("--model-dir", type=Path, default=Path("models/smollm2"),
                    help="--smollm2: an HF SmolLM2 checkpoint to use instead of random init, when it exists")
    a = ap.parse_args()
    a.threads = a.threads or (2 if a.smollm2 else 1)
    torch.set_num_threads(a.threads)
    if a.smollm2:
        smollm2_row(a.repeats, a.new_tokens, a.model_dir)
        return
    model, tok = build_tiny()
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"tiny model: {n_params / 1e6:.2f}M params, torch threads {a.threads}", flush=True)
    print("| regime | seqs | hf tok/s | fast tok/s | fast/hf | floor ms/step | hf ms/step | fast ms/step "
          "| hf/floor | fast/floor | prefix hit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, P in (("overhead-bound", 8), ("compute-bound", 64))[: 1 if a.quick else 2]:
        r = regime(model, tok, name, P, a.repeats)
        print(f"| {name} | {r['seqs']} | {r['hf_tps']:.0f} | {r['fast_tps']:.0f} | **{r['fast_tps'] / r['hf_tps']:.2f}x** "
              f"| {r['floor_ms']:.2f} | {r['hf_step_ms']:.2f} | {r['fast_step_ms']:.2f} | {r['hf_step_ms'] / r['floor_ms']:.2f} "
              f"| **{r['fast_floor_ratio']:.2f}** | {r['hit_rate']:.3f} |", flush=True)
        print(f"  fast without its C kernels (tensor path, same run): {r['tensor_step_ms']:.2f} ms/step = "
              f"{r['tensor_floor_ratio']:.2f}x the floor; with them {r['fast_step_ms']:.2f} ms/step "
              f"({r['tensor_step_ms'] / r['fast_step_ms']:.2f}x faster)", flush=True)
        print(f"  weight sync (load_weights + verify, {n_params / 1e6:.2f}M params): {r['sync_ms']:.1f} ms = "
              f"{100 * r['sync_frac']:.2f}% of this regime's fast generate call", flush=True)
    spec = speculative(tok, a.repeats, a.copy_steps)
    base = spec[0]["wall"]
    print(f"\nextraction (8 requests, greedy, 64 max new; plain fast copies {spec[0]['exact']}/8 spans exactly)")
    print("| engine | tok/s | speed-up vs fast | acceptance | tokens/seq-step | greedy output identical |")
    print("|---|---|---|---|---|---|")
    for r in spec:
        acc = "-" if r["acc"] is None else f"{r['acc']:.3f}"
        ps = "-" if r["per_step"] is None else f"{r['per_step']:.2f}"
        print(f"| {r['name']} | {r['tokens'] / r['wall']:.0f} | **{base / r['wall']:.2f}x** | {acc} | {ps} | {r['same']} |")


if __name__ == "__main__":
    main()
