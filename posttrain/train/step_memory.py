"""Each training step's memory, for its metrics row (the report's "memory per step" panel).

    mem = StepMemory()          # at the loop's start
    row.update(mem.read())      # at each step's end: this step's figures; the next step's peak starts here

`mem/step_peak_gib`: the process's resident high-water mark since the previous read (Linux: /proc/self/status
VmHWM, reset by writing 5 to /proc/self/clear_refs), so a step's figure is that step's, not the run's. The
first step's includes loading. Where the reset is refused (not Linux, or a locked-down /proc) the figure is
the run's peak so far (`ru_maxrss`) and `mem/peak_is_run` says so (1.0).
`mem/rss_gib`: resident now. A steady rise over steps is memory growing (a cache, fragmentation): the thing
RSS at the end of a run hides and `benchmarks/rl_memory_trace.py` digs into.
`mem/cuda_peak_gib`: torch's peak allocated on the current CUDA device over the step, when CUDA is in use.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

GIB = 2**30
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(key: str) -> int | None:
    """A `key:  N kB` line of /proc/self/status, or None off Linux."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Start VmHWM again from the current RSS; False where /proc refuses."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


class StepMemory:
    """Reads a step's memory figures and starts the next step's peak (module docstring)."""

    def __init__(self) -> None:
        self.resets = _reset_peak()

    def read(self) -> dict[str, float]:
        hwm, rss = _status_kib("VmHWM"), _status_kib("VmRSS")
        if hwm is None or rss is None:  # not Linux: the run's peak (macOS reports bytes, Linux KiB)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
            row = {"mem/step_peak_gib": peak / GIB, "mem/peak_is_run": 1.0}
        else:
            row = {"mem/step_peak_gib": hwm * 1024 / GIB, "mem/rss_gib": rss * 1024 / GIB}
            if not self.resets:
                row["mem/peak_is_run"] = 1.0
        row.update(self._cuda())
        self.resets = _reset_peak()
        return row

    @staticmethod
    def _cuda() -> dict[str, float]:
        torch = sys.modules.get("torch")  # never imports torch, nor initialises CUDA, for this
        if torch is None or not torch.cuda.is_initialized():
            return {}
        peak = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        return {"mem/cuda_peak_gib": peak / GIB}
