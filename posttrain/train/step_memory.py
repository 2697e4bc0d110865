"""Each training step's memory, for its metrics row (the report's "memory per step" panel).

    row.update(step_memory())   # at each step's end

`mem/rss_gib`: resident at the step's end (Linux: /proc/self/status VmRSS). A steady rise over steps is memory
growing (a cache, fragmentation), which a run's final figure hides; `benchmarks/rl_memory_trace.py` digs into it.
`mem/peak_gib`: the process's resident high-water mark so far (VmHWM; elsewhere `ru_maxrss`). It is the run's
peak, not the step's: Linux could restart it each step (writing 5 to /proc/self/clear_refs), but that would also
lower what `/usr/bin/time -v` and `getrusage` report for the whole process, the figures users measure a run by.
`mem/cuda_step_peak_gib`: torch's peak allocated on the current CUDA device over the step, when CUDA is in use
(torch's own counter, restarted each step: no outside tool reads it).
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

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
