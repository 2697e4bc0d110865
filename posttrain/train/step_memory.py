"""Each training step's memory, for its metrics row (the report's "memory per step" panel).

    row.update(step_memory())   # at each step's end

`mem/rss_gib`: resident at the step's end (Linux: /proc/self/status VmRSS). A steady rise over steps is memory
growing (a cache, fragmentation), which a run's final figure hides; `benchmarks/rl_memory_trace.py` digs into it.
`mem/peak_gib`: the process's resident high-water mark so far (VmHWM; elsewhere `ru_maxrss`). It is the run's
peak, not the step's: Linux could restart it each step (writing 5 to /proc/self/clear_refs), but that would also
lower what `/usr/bin/time -v` and `getrusage` report for the whole process, the figures users measure a run by.
`mem/cuda_step_peak_gib`: torch's peak allocated on the current CUDA device over the step, when CUDA is in use
(torch's own counter, restarted each step: no outside tool reads it).

    release_free_heap()         # the RL loop, just before: glibc's free heap back to the kernel

Why the RL loop releases: its update frees and allocates activations of a different size every step (the
token counts change), and glibc keeps the freed chunks resident in its arenas. Over 100 steps of the TRL
side-by-side the free heap grew 0.6 -> 1.5 GiB while live tensors stayed at 1.23 GiB; malloc_trim(0) after
each step lowered the run's step peak 3.73 -> 3.50 GiB, peak PSS 3.61 -> 3.37, at ~1 ms a call
(`benchmarks/rl_memory_trace.py --steps 100 --variants notrim now`).
"""

from __future__ import annotations

import ctypes
import resource
import sys
from pathlib import Path
from typing import Callable

GIB = 2**30
_STATUS = Path("/proc/self/status")


def _status_kib(*keys: str) -> dict[str, int] | None:
    """The `key:  N kB` lines of /proc/self/status, from ONE read (so they are one snapshot), or None off Linux.

    Two reads would race the process's other threads: RSS read after the high-water mark could exceed it.
    """
    try:
        text = _STATUS.read_text()
    except OSError:
        return None
    found = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")  # "VmRSS:\t  123456 kB"
        if name in keys:
            found[name] = int(rest.split()[0])
    return found if len(found) == len(keys) else None


def _glibc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None (macOS, musl: no such call; nothing to do there)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim  # glibc's soname (musl has none of this name, nor the call)
    except (OSError, AttributeError):
        return None


_TRIM = _glibc_trim()


def release_free_heap() -> bool:
    """Hand glibc's free heap pages back to the kernel (malloc_trim(0): the arenas' top and, since glibc
    2.8, whole free pages inside them). Returns whether any memory was released; False off glibc."""
    return bool(_TRIM(0)) if _TRIM is not None else False


def step_memory() -> dict[str, float]:
    """The step's memory figures (module docstring); never resets the process's own high-water mark."""
    kib = _status_kib("VmHWM", "VmRSS")
    if kib is None:  # not Linux: getrusage's peak (macOS reports bytes, Linux KiB)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        row = {"mem/peak_gib": peak / GIB}
    else:  # max(): the kernel folds the current RSS into VmHWM lazily; a peak is never below what is resident now
        row = {"mem/peak_gib": max(kib["VmHWM"], kib["VmRSS"]) * 1024 / GIB, "mem/rss_gib": kib["VmRSS"] * 1024 / GIB}
    row.update(_cuda_step_peak())
    return row


def _cuda_step_peak() -> dict[str, float]:
    torch = sys.modules.get("torch")  # never imports torch, nor initialises CUDA, for this
    if torch is None or not torch.cuda.is_initialized():
        return {}
    peak = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()  # torch's own counter: restarting it disturbs no outside tool
    return {"mem/cuda_step_peak_gib": peak / GIB}
