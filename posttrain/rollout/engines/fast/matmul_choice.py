"""`engine.args.matmul_dtype: auto`: the weight-matmul dtype this machine runs fastest, measured once.

    name = resolve_matmul_dtype("auto", device)   # "bfloat16" or "float32"; other names pass through
    choose(fp32_s=0.010, bf16_s=0.014)          # "float32": bf16 must win by MARGIN to be picked

bf16 weight matmuls run ~2-4x fp32 on a CPU with AMX (Intel Sapphire Rapids and later), but on
a CPU with only AVX512-BF16 (the project's AMD EPYC Zen 4 VMs) or with neither, oneDNN may
convert and run them slower than fp32. CPU flags do not tell those apart reliably (AVX512-BF16
alone is no guarantee), so the choice is measured: a decode-shaped product (64 rows, the
SmolLM2-135M MLP's 576 x 1536 weight) timed in both dtypes, interleaved, best of a few rounds,
on the threads the engine will use. bf16 is picked only when it is faster by `MARGIN`, so the
automatic choice never makes rollouts slower than fp32 by more than the timing noise. The
result is cached per (device type, thread count) for the process: one measurement (~50 ms),
said once on stderr.
A CUDA device picks bf16 where torch says it is supported (tensor cores), without timing.
"""

from __future__ import annotations

import functools
import sys
import time

import torch

MARGIN = 0.9  # bf16 must take at most 90% of fp32's time to be chosen
SHAPE = (64, 576, 1536)  # rows (a decode batch), in, out: SmolLM2-135M's up projection


def choose(fp32_s: float, bf16_s: float) -> str:
    """The faster dtype's name, preferring float32 unless bf16 is clearly faster."""
    return "bfloat16" if bf16_s <= MARGIN * fp32_s else "float32"


def time_matmuls(rounds: int = 5, shape: tuple[int, int, int] = SHAPE) -> tuple[float, float]:
    """(fp32 seconds, bf16 seconds) for one `shape` product on the CPU, the best of `rounds`,
    measured interleaved so a load change hits both alike. bf16 runs as the engine runs it:
    activations cast down, weights already bf16, output cast back (model.py `_linear`)."""
    m, k, n = shape
    g = torch.Generator().manual_seed(0)
    x = torch.randn(m, k, generator=g)
    w = torch.randn(n, k, generator=g)
    wb = w.to(torch.bfloat16)

    def fp32() -> None:
        torch.nn.functional.linear(x, w)

    def bf16() -> None:
        torch.nn.functional.linear(x.to(torch.bfloat16), wb).to(torch.float32)

    best = {fp32: float("inf"), bf16: float("inf")}
    for fn in (fp32, bf16):  # warm-up: oneDNN builds its kernels on the first call
        fn()
    for _ in range(rounds):
        for fn in (fp32, bf16):
            t0 = time.perf_counter()
            for _ in range(4):
                fn()
            best[fn] = min(best[fn], (time.perf_counter() - t0) / 4)
    return best[fp32], best[bf16]


@functools.lru_cache(maxsize=None)
def _measured(device_type: str, threads: int) -> str:
    if device_type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return choose(*time_matmuls())


def resolve_matmul_dtype(name: str | None, device: torch.device | str | None = None) -> str | None:
    """`name` as given, except "auto": the measured choice for `device` (cached per process)."""
    if name != "auto":
        return name
    dev = torch.device(device) if device is not None else torch.device("cpu")
    return _measured(dev.type, torch.get_num_threads())


@functools.lru_cache(maxsize=None)
def say_choice(name: str) -> None:
    """One stderr line per process and choice: which dtype `auto` picked (each engine rebuild is silent)."""
    print(f"posttrain: engine.args.matmul_dtype=auto: weight matmuls in {name} (measured on this machine)",
          file=sys.stderr)
