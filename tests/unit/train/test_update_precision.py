"""`trainer.precision: auto` in RL on a CPU (train/lora.resolve_precision): the update runs under
bf16 autocast exactly when the rollouts run bf16 weight matmuls that this machine measured faster
than fp32; the old logprobs of the ratio are then the trainer's own bf16-autocast ones."""

from __future__ import annotations

import pytest
import torch

from posttrain.config import RLConfig, TrainerConfig
from posttrain.rollout.engines.fast import matmul_choice
from posttrain.train.lora import resolve_precision, use_bf16
from posttrain.train.update import recompute_old_logprobs, update_policy

from .test_old_logprobs import bf16_rl_state, bf16_rollouts, last_row, tiny, with_logprobs  # noqa: F401  (tiny: the module fixture)


@pytest.fixture
def measured(monkeypatch):
    """Sets what this 'machine' measures: the faster of bf16 and fp32 weight matmuls on a CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    matmul_choice._measured.cache_clear()

    def set_faster(dtype: str) -> None:
        matmul_choice._measured.cache_clear()
        times = (0.010, 0.003) if dtype == "bfloat16" else (0.010, 0.020)
        monkeypatch.setattr(matmul_choice, "time_matmuls", lambda: times)

    yield set_faster
    matmul_choice._measured.cache_clear()


def test_auto_follows_bf16_rollouts_where_the_machine_measured_bf16_faster(measured):
    measured("bfloat16")
    tcfg = resolve_precision(TrainerConfig(), "bfloat16")
    assert tcfg.precision == "bf16" and use_bf16(tcfg)


def test_auto_stays_fp32_where_bf16_measured_slower_even_with_bf16_rollouts(measured):
    measured("float32")  # an EPYC without AMX, with matmul_dtype: bfloat16 set by hand
    assert not use_bf16(resolve_precision(TrainerConfig(), "bfloat16"))


def test_fp32_rollouts_keep_an_fp32_update(measured):
    measured("bfloat16")
    assert not use_bf16(resolve_precision(TrainerConfig(), "float32"))
    assert not use_bf16(resolve_precision(TrainerConfig(), None))  # an engine that does not say


def test_an_explicit_fp32_precision_is_kept_with_bf16_rollouts(measured):
    measured("bfloat16")
    assert resolve_precision(TrainerConfig(precision="fp32"), "bfloat16").precision == "fp32"


def test_the_recompute_under_bf16_autocast_is_the_updates_own_forward(tiny):
    """A separate recompute pass (several minibatches or epochs) computes what the update's
    forward computes under the same `trainer.precision`, so the ratio starts at exactly 1."""
    model, tok = tiny
    trajs = bf16_rollouts(model, tok)
    bf16 = TrainerConfig(precision="bf16")
    cfg = RLConfig(max_new_tokens=12)
    (auto_lp,) = recompute_old_logprobs(model, [trajs], tok.pad_token_id, cfg, bf16)
    (fp32_lp,) = recompute_old_logprobs(model, [trajs], tok.pad_token_id, cfg)
    adv = torch.randn(len(trajs), generator=torch.Generator().manual_seed(1))
    mismatch = {}
    for name, lp in (("bf16 recompute", auto_lp), ("fp32 recompute", fp32_lp)):
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the update's forward, the weights unchanged
        st = update_policy(model, opt, with_logprobs(trajs, lp), adv, cfg, tok.pad_token_id, tcfg=bf16)
        mismatch[name] = st["logprob_mismatch"]  # max |update's logprobs - the batch's old ones|
    assert mismatch["bf16 recompute"] == 0.0
    assert mismatch["fp32 recompute"] > 1e-4  # autocast took effect: fp32 numerics differ


def test_an_rl_run_with_bf16_rollouts_updates_under_bf16_autocast(tmp_path, measured, capfd):
    """Through the loop (build_state -> train_rl) on a machine that measured bf16 faster: the run
    says the update follows the rollouts into bf16, and the fused recompute keeps the ratio at 1."""
    measured("bfloat16")
    st = bf16_rl_state(tmp_path, "engine.args={matmul_dtype: auto}")
    assert st.cfg.trainer.precision == "bf16"
    assert "trainer.precision=auto: the update runs under bf16 autocast" in capfd.readouterr().err
    assert last_row(st)["train/clip_frac"] == 0.0  # old and new logprobs: one bf16-autocast forward
