"""The fused CPU decode-attention kernel (rollout/engines/fast/cpu_kernels.py): each test one property."""

from __future__ import annotations

import pytest
import torch

from posttrain.rollout.engines.fast import cpu_kernels as ca
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine
from tests.unit.rollout.conftest import random_prompts

pytestmark = pytest.mark.skipif(not ca.available(), reason=f"no C compiler: {ca.build_error()}")


def _reference(q, kc, vc, rows, length):
    """Plain softmax attention over each row's own lane, positions < length: [B, kvh, g, D]."""
    D, cap = q.shape[-1], kc.shape[2]
    K, V = kc[rows], vc[rows]  # [B, kvh, cap, D]
    att = torch.matmul(q, K.transpose(-1, -2)) * D ** -0.5  # [B, kvh, g, cap]
    visible = torch.arange(cap) < length[:, None]  # [B, cap]
    return torch.matmul(att.masked_fill(~visible[:, None, None], float("-inf")).softmax(-1), V)


def _lanes(n=12, kvh=2, cap=40, D=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, kvh, cap, D, generator=g), torch.randn(n, kvh, cap, D, generator=g)


NO_ROTATION = (torch.ones(64, 16), torch.zeros(64, 16))  # cos, sin tables that leave vectors as they are


def _run(plan, q, k, v, kc, vc, rope=NO_ROTATION):
    """plan.run on separate q [B, T, kvh, g, D], k, v [B, T, kvh, D]: packed as the fused projection."""
    B, T, kvh, g, D = q.shape
    qkv = torch.cat([q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1)], -1).contiguous()
    return plan.run(qkv, *rope, kc, vc, kvh * g).view(B, T, kvh, g, D)


@pytest.mark.parametrize("g", [1, 3])
def test_matches_softmax_attention_on_own_lanes(g):
    kc, vc = _lanes()
    rows = torch.tensor([3, 0, 7, 11, 5])
    length = torch.tensor([1, 40, 17, 9, 33])
    q, k, v = torch.randn(5, 1, 2, g, 16), torch.randn(5, 1, 2, 16), torch.randn(5, 1, 2, 16)
    out = _run(ca.DecodePlan(rows, length, 12, 40), q, k, v, kc, vc)[:, 0]
    assert (out - _reference(q[:, 0], kc, vc, rows, length)).abs().max() < 1e-5


def test_several_new_tokens_attend_causally():
    kc, vc = _lanes()
    rows, length, T = torch.tensor([3, 0]), torch.tensor([5, 1]), 4
    q, k, v = torch.randn(2, T, 2, 1, 16), torch.randn(2, T, 2, 16), torch.randn(2, T, 2, 16)
    out = _run(ca.DecodePlan(rows, length, 12, 40), q, k, v, kc, vc)  # [2, T, 2, 1, 16]
    for t in range(T):
        assert (out[:, t] - _reference(q[:, t], kc, vc, rows, length + t)).abs().max() < 1e-5


def test_new_keys_and_values_are_written_at_the_last_position():
    kc, vc = _lanes()
    rows, length = torch.tensor([3, 0]), torch.tensor([5, 1])
    k, v = torch.randn(2, 1, 2, 16), torch.randn(2, 1, 2, 16)
    _run(ca.DecodePlan(rows, length, 12, 40), torch.randn(2, 1, 2, 1, 16), k, v, kc, vc)
    assert torch.equal(kc[3, :, 4], k[0, 0]) and torch.equal(vc[0, :, 0], v[1, 0])


def test_keys_and_queries_get_the_models_rotary_embedding():
    from posttrain.rollout.engines.fast.model import _rotate

    g = torch.Generator().manual_seed(1)
    cos, sin = torch.randn(64, 16, generator=g), torch.randn(64, 16, generator=g)
    kc, vc = _lanes()
    rows, length = torch.tensor([3]), torch.tensor([7])
    q, k, v = torch.randn(1, 1, 2, 1, 16), torch.randn(1, 1, 2, 16), torch.randn(1, 1, 2, 16)
    out = _run(ca.DecodePlan(rows, length, 12, 40), q, k, v, kc, vc, (cos, sin))
    c, s_ = cos[6][None, None, None], sin[6][None, None, None]  # position 6, [1, 1, 1, D]
    assert (kc[3, :, 6] - _rotate(k, c, s_)[0, 0]).abs().max() < 1e-5
    want = _reference(_rotate(q.view(1, 1, 2, 16), c, s_).view(1, 2, 1, 16), kc, vc, rows, length)
    assert (out[:, 0] - want).abs().max() < 1e-5


def test_shared_prefix_is_read_from_the_source_lane():
    kc, vc = _lanes()
    kc[4, :, :10], vc[4, :, :10] = kc[2, :, :10], vc[2, :, :10]  # lane 4's prompt = lane 2's
    want = _reference(q := torch.randn(1, 2, 1, 16), kc, vc, torch.tensor([4]), torch.tensor([25]))
    k, v = kc[4:5, None, :, 24].clone(), vc[4:5, None, :, 24].clone()
    kc[4, :, :10] = vc[4, :, :10] = float("nan")  # the row must not read its own prompt copy
    plan = ca.DecodePlan(torch.tensor([4]), torch.tensor([25]), 12, 40, torch.tensor([2]), torch.tensor([10]))
    out = _run(plan, q[:, None], k, v, kc, vc)[:, 0]
    assert (out - want).abs().max() < 1e-5


def test_visiting_order_does_not_change_the_result():
    kc, vc = _lanes()
    rows, length = torch.arange(8), torch.arange(5, 13)
    q, k, v = torch.randn(8, 1, 2, 1, 16), torch.randn(8, 1, 2, 16), torch.randn(8, 1, 2, 16)
    a = _run(ca.DecodePlan(rows, length, 12, 40, order=torch.arange(8)), q, k, v, kc, vc)
    b = _run(ca.DecodePlan(rows, length, 12, 40, order=torch.tensor([7, 2, 5, 0, 1, 6, 3, 4])), q, k, v, kc, vc)
    assert torch.equal(a, b)


@pytest.mark.parametrize("rows,length", [([12], [3]), ([0], [41]), ([0], [0])])
def test_out_of_range_rows_are_named(rows, length):
    with pytest.raises(ValueError, match="outside 12 lanes of 40"):
        ca.DecodePlan(torch.tensor(rows), torch.tensor(length), 12, 40)


def test_rows_sharing_a_lane_are_rejected():
    with pytest.raises(ValueError, match="share a lane"):
        ca.DecodePlan(torch.tensor([2, 2]), torch.tensor([3, 3]), 12, 40)


def test_wrong_lane_shape_is_rejected():
    kc, vc = _lanes()
    plan = ca.DecodePlan(torch.tensor([0]), torch.tensor([3]), 12, 40)
    with pytest.raises(ValueError, match="matching the plan"):
        _run(plan, torch.randn(1, 1, 2, 1, 16), torch.randn(1, 1, 2, 16), torch.randn(1, 1, 2, 16),
             kc[:, :, :20].contiguous(), vc[:, :, :20].contiguous())


def test_new_positions_past_the_lane_are_rejected():
    kc, vc = _lanes()
    plan = ca.DecodePlan(torch.tensor([0]), torch.tensor([38]), 12, 40)
    with pytest.raises(ValueError, match="overrun lanes of 40"):
        _run(plan, torch.randn(1, 4, 2, 1, 16), torch.randn(1, 4, 2, 16), torch.randn(1, 4, 2, 16), kc, vc)


def test_a_build_failure_falls_back(monkeypatch, tmp_path):
    monkeypatch.setattr(ca, "_lib", None)
    monkeypatch.setattr(ca, "_error", None)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    monkeypatch.setattr(ca.shutil, "which", lambda name: None)
    assert not ca.available() and "no C compiler" in ca.build_error()


def test_engine_outputs_equal_with_and_without_the_kernel(tiny):
    """GRPO groups (shared prompts), mixed lengths, lanes compacted as samples finish early."""
    model, tok = tiny
    reqs = [GenRequest(p, SamplingParams(temperature=1.0, max_new_tokens=6 + 5 * i, n=4, seed=i))
            for i, p in enumerate(random_prompts(5, 3, 40, seed=4))]
    fused = FastEngine(model, tok, cache_outputs=False)
    plain = FastEngine(model, tok, cache_outputs=False)
    plain.lm.fused_decode = False
    a, b = fused.generate(reqs), plain.generate(reqs)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    assert max(abs(x - y) for o, p in zip(a, b) for x, y in zip(o.logprobs, p.logprobs)) < 1e-5


def test_c_sampler_draws_what_the_tensor_sampler_draws():
    from posttrain.rollout.engines.fast import sampling

    logits = torch.randn(256, 300, generator=torch.Generator().manual_seed(0)) * 3
    temps = [0.0 if i % 5 == 0 else 0.5 + (i % 3) * 0.4 for i in range(256)]
    rp = sampling.RowParams.build(temps, [1.0] * 256, [0] * 256, list(range(256)), [i % 8 for i in range(256)],
                                  torch.device("cpu"))
    pos = torch.arange(256) % 17
    fused = sampling.sample(logits, rp, pos)
    with sampling.tensor_path():
        plain = sampling.sample(logits, rp, pos)
    assert torch.equal(fused[0], plain[0]) and (fused[1] - plain[1]).abs().max() < 1e-5


def test_c_sampler_breaks_ties_at_the_lowest_id_as_torch_argmax():
    """The C sampler merges per-lane maxima: equal scores in different lanes (and in the scalar
    tail) must still give the lowest id, as the tensor path's argmax does."""
    from posttrain.rollout.engines.fast import sampling

    logits = torch.randn(4, 300, generator=torch.Generator().manual_seed(1))
    logits[0, [13, 5, 299]] = 9.0  # greedy: three equal maxima, lanes 5 and 13 % 8 and the tail
    logits[1, [299, 298]] = 9.0  # greedy: equal maxima in the tail only
    logits[2, [21, 3]] = float("inf")  # sampled: two infinite scores in different lanes
    logits[3, [7, 296]] = float("inf")  # sampled: a lane's and a tail column's
    rp = sampling.RowParams.build([0.0, 0.0, 1.0, 1.0], [1.0] * 4, [0] * 4, [0, 1, 2, 3], [0] * 4,
                                  torch.device("cpu"))
    fused, _ = sampling.sample(logits, rp, torch.zeros(4, dtype=torch.long))
    with sampling.tensor_path():
        plain, _ = sampling.sample(logits, rp, torch.zeros(4, dtype=torch.long))
    assert fused.tolist() == plain.tolist() == [5, 298, 3, 7]


def test_silu_mul_matches_the_tensor_ops():
    gu = torch.randn(3, 5, 2 * 37) * 20  # large |x| on both sides; 37 leaves a scalar tail
    g, u = gu.split(37, dim=-1)
    assert (ca.silu_mul(gu) - torch.nn.functional.silu(g) * u).abs().max() < 1e-4


def test_c_sampler_draws_a_token_with_all_the_mass_at_a_262k_vocabulary():
    from tests.unit.rollout.test_sampling import near_certain_draws

    tok = near_certain_draws(1000, 2**18)  # the C path (unwarped CPU fp32 rows); the old uniforms missed ~16
    assert int((tok != 0).sum()) == 0
