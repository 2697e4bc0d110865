"""Real models: GGUF -> HF conversion cost, and HF `generate` throughput of the result.

    .venv/bin/python benchmarks/real_models.py                      # every installed catalog model
    .venv/bin/python benchmarks/real_models.py --models smollm2-135m-instruct --new-tokens 32

Part 1 runs `posttrain models get NAME` in a child process per model and reports its wall
time, peak RSS (from wait4, that child alone) and the manifest's phase timings. Part 2 loads
the converted SmolLM2 and times greedy `generate` (min_new_tokens = max_new_tokens, so every
row produces exactly N tokens) at batch 1 and 8, fp32 and bf16, on --threads CPU threads,
after one warm-up call; tok/s = batch * N / seconds, the median of --repeats calls.

Limits: CPU numbers on a shared machine vary run to run (other processes compete for the
cores); the table prints the load average so a reader can judge. No GPU path here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["What is 2+3?", "Name a primary colour.", "What is the capital of France?", "Say hello in Spanish.",
             "How many legs has a spider?", "What is 10 divided by 2?", "Name a planet.", "What colour is the sky?"]


def convert(name: str, work: Path) -> dict:
    """`posttrain models get NAME` in a child: wall time, its own peak RSS (wait4), its manifest."""
    out = work / name
    cmd = [sys.executable, "-m", "posttrain.cli.main", "models", "get", name, "--out", str(out), "--no-install"]
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so the rusage is this child's alone
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{name}: posttrain models get failed: {(err.read().strip().splitlines() or ['?'])[-1]}")
    m = json.loads((out / "posttrain-model.json").read_text())
    return {"model": name, "wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "manifest": m, "out": out}


def throughput(model_dir: Path, dtype: str, batch: int, new_tokens: int, repeats: int) -> float:
    import torch

    from posttrain.models.io import load_policy

    model, tok = load_policy(model_dir, dtype=dtype)
    model.eval()
    chats = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
             for q in (QUESTIONS * 2)[:batch]]
    enc = tok(chats, return_tensors="pt", padding=True)  # [batch, T], left-padded
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.inference_mode():
        model.generate(**enc, **kw)  # warm-up
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            out = model.generate(**enc, **kw)
            times.append(time.perf_counter() - t)
    assert out.shape[1] - enc["input_ids"].shape[1] == new_tokens
    return batch * new_tokens / statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", help="catalog names (default: every installed one)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-generate", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    from posttrain.models.catalog import real_models

    names = args.models or [m.name for m in real_models() if m.installed()]
    results: dict = {"load_average": os.getloadavg(), "cpus": os.cpu_count(), "conversion": [], "generate": []}
    with tempfile.TemporaryDirectory(prefix="real-models-bench-") as d:
        print(f"{'model':<24}{'wall s':>8}{'dequant s':>11}{'save s':>8}{'peak RSS MB':>13}{'dense MB':>10}")
        for name in names:
            r = convert(name, Path(d))
            t = r["manifest"]["timings_s"]
            dense = r["manifest"]["files"]["model.safetensors"]["bytes"] / 2**20
            print(f"{name:<24}{r['wall_s']:>8.1f}{t['load_dequantise_s']:>11.1f}{t['save_s']:>8.1f}"
                  f"{r['peak_rss_mb']:>13.0f}{dense:>10.0f}")
            results["conversion"].append({"model": name, "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"],
                                          "timings_s": t, "dense_mb": dense})
            if name == "smollm2-135m-instruct" and not args.skip_generate:
                import torch

                torch.set_num_threads(args.threads)
                print(f"\nHF generate, greedy, {args.new_tokens} new tokens, {args.threads} thread(s): {name}")
                print(f"{'dtype':<10}{'batch':>6}{'tok/s':>9}")
                for dtype in ("float32", "bfloat16"):
                    for batch in (1, 8):
                        tps = throughput(Path(r["out"]), dtype, batch, args.new_tokens, args.repeats)
                        print(f"{dtype:<10}{batch:>6}{tps:>9.1f}")
                        results["generate"].append({"model": name, "dtype": dtype, "batch": batch,
                                                    "threads": args.threads, "tok_s": tps})
    print(f"\nload average at start {results['load_average'][0]:.1f} on {results['cpus']} CPUs")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
