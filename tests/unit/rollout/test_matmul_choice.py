"""`engine.args.matmul_dtype: auto` (rollout/engines/fast/matmul_choice.py): bf16 only where this
machine measures it faster, fp32 otherwise; measured once per process."""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engines.fast import matmul_choice
from posttrain.rollout.engines.fast.engine import FastEngine
from posttrain.rollout.engines.fast.matmul_choice import choose, resolve_matmul_dtype


@pytest.fixture
def fresh_choice():
    matmul_choice._measured.cache_clear()
    yield
    matmul_choice._measured.cache_clear()


def test_auto_keeps_fp32_where_bf16_is_slower_or_barely_faster():
    assert choose(fp32_s=0.010, bf16_s=0.014) == "float32"  # a CPU without fast bf16 (no AMX)
    assert choose(fp32_s=0.010, bf16_s=0.0095) == "float32"  # within the noise: never a slower run
    assert choose(fp32_s=0.010, bf16_s=0.004) == "bfloat16"


def test_an_engine_on_a_machine_where_bf16_is_slower_runs_fp32(fresh_choice, monkeypatch, tiny):
    monkeypatch.setattr(matmul_choice, "time_matmuls", lambda: (0.010, 0.020))
    eng = FastEngine(tiny[0], tiny[1], matmul_dtype="auto")
    assert eng.matmul_dtype == "float32" and eng.lm.matmul_dtype is None and not eng.lm._mm


def test_an_engine_on_a_machine_where_bf16_is_faster_runs_bf16(fresh_choice, monkeypatch, tiny):
    monkeypatch.setattr(matmul_choice, "time_matmuls", lambda: (0.010, 0.003))
    eng = FastEngine(tiny[0], tiny[1], matmul_dtype="auto")
    assert eng.matmul_dtype == "bfloat16" and eng.lm.matmul_dtype == torch.bfloat16


def test_the_measurement_runs_once_per_process(fresh_choice, monkeypatch):
    calls = []
    monkeypatch.setattr(matmul_choice, "time_matmuls", lambda: calls.append(1) or (0.01, 0.02))
    assert [resolve_matmul_dtype("auto") for _ in range(3)] == ["float32"] * 3
    assert len(calls) == 1
    assert resolve_matmul_dtype("bfloat16") == "bfloat16"  # an explicit choice is never measured


def test_the_real_measurement_times_both_dtypes():
    fp32_s, bf16_s = matmul_choice.time_matmuls(rounds=1, shape=(8, 64, 64))
    assert fp32_s > 0 and bf16_s > 0


def test_the_choice_is_said_once(fresh_choice, monkeypatch, capsys, tiny):
    monkeypatch.setattr(matmul_choice, "time_matmuls", lambda: (0.010, 0.020))
    matmul_choice.say_choice.cache_clear()
    for _ in range(2):
        FastEngine(tiny[0], tiny[1], matmul_dtype="auto")
    assert capsys.readouterr().err.count("engine.args.matmul_dtype=auto: weight matmuls in float32") == 1
