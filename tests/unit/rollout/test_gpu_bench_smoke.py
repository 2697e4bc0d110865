"""benchmarks/gpu_rollout.py imports and its CPU-side logic runs end to end (--smoke)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_gpu_rollout_smoke_mode_reports_every_metric():
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu_rollout.py"
    spec = importlib.util.spec_from_file_location("gpu_rollout", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--smoke"])
    for k in ("hf_dynamic_tps", "hf_static_tps", "fast_tps", "fast_bandwidth_TBps", "logprob_max_abs_diff"):
        assert res[k] > 0 or k == "logprob_max_abs_diff"
    assert res["logprob_max_abs_diff"] < 1e-4  # fp32 on CPU
