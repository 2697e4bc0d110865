"""Where the RL process's memory goes, step by step: the TRL side-by-side's run (vs_trl_smollm2.py, ours
side, bf16 rollouts and update) traced under settings that move it.

    .venv/bin/python benchmarks/rl_memory_trace.py [--steps 12] [--seed 0] [--variants before cache64 budget1g now]

Each variant is one `posttrain rl` process (the benchmark's own command and data, --steps steps). A
`sitecustomize` put on its PYTHONPATH (this process writes it to the output folder; nothing of posttrain
changes) appends one row per logged step with:
  step_peak_mb   the process's peak RSS within that step (VmHWM, reset after each row via /proc/self/clear_refs)
  rss_mb         RSS when the step's row is logged
  heap_inuse_mb  glibc's bytes in use (mallinfo2: arena + mmapped blocks held by live allocations)
  heap_free_mb   bytes glibc holds free in its arenas (resident once touched: fragmentation)
  tensors_mb     the bytes of every live torch storage reachable from Python (gc), counted once
The variants, each the whole setting (a user's environment variable wins over the command's default):
  before   oneDNN's primitive cache at its 1,024 default, the update's passes at the old 2 GiB budget (824 tokens)
  cache64  the cache at 64 (the command's default since 2026-12-07), passes at 824 tokens
  budget1g the cache at 1,024, passes at the 1 GiB budget (`rl.micro_tokens: auto` now: 412 tokens)
  now      both defaults
  cache512 the cache at 512, passes at the 1 GiB budget
  notrim   both defaults, without the loop's trim of glibc's free heap after each step (before 79afc8b; `now`
           trims, train/step_memory.release_free_heap)
Prints a markdown table (max step peak, mean seconds a step, in generation and in the update, heap in use first -> last and its growth a step,
live tensors first -> last) and writes every row to --out/trace-<variant>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from rl_update_speed import header  # noqa: E402
from vs_trl_smollm2 import run_ours, write_data  # noqa: E402


HOOK = r'''
import os, sys
if os.environ.get("PT_MEMTRACE") and sys.argv[0].endswith("posttrain"):
    import ctypes, gc, json
    class _MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    _libc = ctypes.CDLL("libc.so.6")
    _libc.mallinfo2.restype = _MallInfo2

    def _row(step):
        import torch
        status = open("/proc/self/status").read()
        kib = lambda key: int(status.split(key + ":")[1].split()[0])  # noqa: E731
        seen, live = set(), 0
        for o in gc.get_objects():
            try:
                if isinstance(o, torch.Tensor) and o.device.type == "cpu" and not o.is_meta:
                    s = o.untyped_storage()
                    if s.data_ptr() and s.data_ptr() not in seen:
                        seen.add(s.data_ptr())
                        live += s.nbytes()
            except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
                pass
        mi = _libc.mallinfo2()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM starts again: the next row's peak is that step's
        return {"step": step, "step_peak_mb": kib("VmHWM") >> 10, "rss_mb": kib("VmRSS") >> 10,
                "heap_inuse_mb": (mi.uordblks + mi.hblkhd) >> 20, "heap_free_mb": mi.fordblks >> 20,
                "tensors_mb": live >> 20}

    import posttrain.store.metrics as _metrics
    _log = _metrics.MetricsLog.log

    def _traced(self, step, metrics):
        _log(self, step, metrics)
        if "time/step_s" in metrics:
            with open(os.environ["PT_MEMTRACE"], "a") as f:
                f.write(json.dumps({**_row(step), **{k.split("/")[1]: metrics.get(k, 0.0) for k in
                                                     ("time/step_s", "time/generate_s", "time/update_s")}}) + "\n")
    _metrics.MetricsLog.log = _traced
    if os.environ.get("PT_NO_HEAP_TRIM"):  # the "notrim" variant: the loop as it was before 79afc8b
        import posttrain.train.rl as _rl
        _rl.release_free_heap = lambda: False
'''

VARIANTS = {  # name: (environment, posttrain rl overrides)
    "before": ({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"}, ["rl.micro_tokens=824"]),
    "cache64": ({}, ["rl.micro_tokens=824"]),
    "budget1g": ({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"}, []),
    "now": ({}, []),
    "cache512": ({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "512"}, []),
    "notrim": ({"PT_NO_HEAP_TRIM": "1"}, []),
}
BF16 = ["engine={name: fast, args: {matmul_dtype: auto}}", "rl.old_logprobs=recompute"]


def summarise(name: str, rows: list[dict], pss_gib: float) -> str:
    first, last = rows[0], rows[-1]
    growth = (last["heap_inuse_mb"] - first["heap_inuse_mb"]) / max(1, len(rows) - 1)
    return (f"| {name} | {max(r['step_peak_mb'] for r in rows) / 1024:.2f} | {pss_gib:.2f} | "
            f"{statistics.mean(r['step_s'] for r in rows):.2f} | {statistics.mean(r['generate_s'] for r in rows):.2f} | "
            f"{statistics.mean(r['update_s'] for r in rows):.2f} | {first['heap_inuse_mb']} -> {last['heap_inuse_mb']} "
            f"({growth:+.1f} / step) | {max(r['heap_free_mb'] for r in rows)} | {first['tensors_mb']} -> {last['tensors_mb']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/smollm2")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", nargs="+", default=["before", "cache64", "budget1g", "now"], choices=list(VARIANTS))
    ap.add_argument("--out", default="runs/rl-memory-trace")
    a = ap.parse_args()
    if not (Path(a.model) / "config.json").is_file():
        sys.exit(f"{a.model}: no model there; run `posttrain models get smollm2 --out {a.model}` first")
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "hook").mkdir(exist_ok=True)
    (out / "hook" / "sitecustomize.py").write_text(HOOK)
    # the side-by-side's own settings (vs_trl_smollm2.py's defaults): 8 prompts x 8 samples, 40 tokens, lr 1e-4
    bench = argparse.Namespace(model=a.model, steps=a.steps, prompts=8, group=8, max_new=40, lr=1e-4, n_train=1000,
                               n_eval=200, difficulty=0.3, seeds=[a.seed], wall_minutes=None)
    data = write_data(out, bench)
    header(2)  # date, CPU and its bf16 flags, torch, threads, load
    print("| variant | max step peak GiB (RSS) | peak PSS GiB (tree) | mean s / step | generation s | update s | heap in use MB "
          "| max heap free MB | live tensors MB |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---|", flush=True)
    for name in a.variants:
        env, overrides = VARIANTS[name]
        trace = out / f"trace-{name}.jsonl"
        trace.unlink(missing_ok=True)
        saved = dict(os.environ)
        os.environ.pop("ONEDNN_PRIMITIVE_CACHE_CAPACITY", None)
        os.environ.update(env, PT_MEMTRACE=str(trace),
                          PYTHONPATH=os.pathsep.join(filter(None, [str(out / "hook"), saved.get("PYTHONPATH")])))
        try:
            bench.extra = [*BF16, *overrides]
            (out / name).mkdir(exist_ok=True)
            res = run_ours(bench, data, a.seed, out / name)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        rows = [json.loads(x) for x in trace.read_text().splitlines() if x.strip()]
        print(summarise(name, rows, res["peak_pss_gib"]), flush=True)


if __name__ == "__main__":
    main()
