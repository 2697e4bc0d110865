"""The one-pass update layout (`rl.prefix_layout: varlen`, train/varlen.py) gives the plain
layout's logprobs, entropies, gradients, and the same update.

Tolerance: fp32 throughout; logprobs and entropies within 1e-5 absolute, gradients within
1e-5 absolute + 1e-4 relative (the layouts sum the same terms in a different order).
"""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.config import RLConfig
from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.losses import entropy_from_logits
from posttrain.train.update import update_policy
from posttrain.train.varlen import varlen_batch
from tests.unit.train.test_prefix_kv import grads, llama, trajs


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    return model.eval(), tok.pad_token_id


def plain_and_varlen(model, pad, ts, **kw):
    tb = pack_trajectories(ts, pad)
    plain, logits = token_logprobs(model, tb.input_ids, tb.attention_mask, with_logits=True)
    lp, ent = varlen_batch(ts, tb.loss_mask.shape[1], pad, **kw).logprobs(model)
    return tb.loss_mask, plain, entropy_from_logits(logits), lp, ent


@pytest.mark.parametrize("bucket_tokens,pass_tokens", [(1e9, float("inf")), (0.0, float("inf")), (0.0, 8.0)])
def test_logprobs_and_entropies_match_the_plain_layout(tiny, bucket_tokens, pass_tokens):
    """One bucket each, one bucket per distinct length, and whole groups cut into passes (CPU's default)."""
    with torch.no_grad():
        m, plain, pent, lp, ent = plain_and_varlen(*tiny, trajs(), bucket_tokens=bucket_tokens, pass_tokens=pass_tokens)
    assert torch.allclose(plain * m, lp * m, atol=1e-5)
    assert torch.allclose(pent * m, ent * m, atol=1e-5)


def test_grouped_query_attention_matches_the_plain_layout():
    model = llama("sdpa")
    with torch.no_grad():
        m, plain, _, lp, _ = plain_and_varlen(model, 0, trajs())
    assert torch.allclose(plain * m, lp * m, atol=1e-5)


def test_gradients_match_the_plain_layout(tiny):
    model, pad = copy.deepcopy(tiny[0]), tiny[1]
    ts = trajs()
    tb = pack_trajectories(ts, pad)
    w = torch.randn(tb.loss_mask.shape, generator=torch.Generator().manual_seed(0)) * tb.loss_mask
    a = grads(model, lambda: token_logprobs(model, tb.input_ids, tb.attention_mask)[0], w)
    b = grads(model, lambda: varlen_batch(ts, tb.loss_mask.shape[1], pad, bucket_tokens=0.0,
                                          pass_tokens=8.0).logprobs(model)[0], w)
    assert len(a) == len(b) > 0
    assert all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b))


def test_lora_gradients_match_through_peft():
    from posttrain.config import LoraConfig, TrainerConfig
    from posttrain.train.lora import prepare_model

    model = prepare_model(llama(), TrainerConfig(lora=LoraConfig(target_modules=["q_proj", "v_proj"])), 0)
    for n, p in model.named_parameters():  # peft starts B at zero: make the adapters matter
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.1)
    ts = trajs()
    tb = pack_trajectories(ts, 0)
    w = torch.randn(tb.loss_mask.shape, generator=torch.Generator().manual_seed(0)) * tb.loss_mask
    a = grads(model, lambda: token_logprobs(model, tb.input_ids, tb.attention_mask)[0], w)
    b = grads(model, lambda: varlen_batch(ts, tb.loss_mask.shape[1], 0).logprobs(model)[0], w)
    assert len(a) == len(b) > 0
    assert all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b))


def test_the_model_keeps_its_own_attention_after_a_varlen_pass(tiny):
    model, pad = tiny
    before = model.config._attn_implementation
    with torch.no_grad():
        plain_and_varlen(model, pad, trajs())
    assert model.config._attn_implementation == before


def test_an_update_in_one_pass_equals_the_kv_and_plain_updates(tiny):
    """The loss and the updated weights of update_policy, layout against layout (SGD: the step is the gradient)."""
    model, pad = tiny
    ts = trajs()
    adv = torch.randn(len(ts), generator=torch.Generator().manual_seed(2))
    out = {}
    for name, kw in (("plain", dict(share_prefix=False)), ("kv", dict(prefix_layout="kv")),
                     ("varlen", dict(prefix_layout="varlen"))):
        m = copy.deepcopy(model)
        st = update_policy(m, torch.optim.SGD(m.parameters(), lr=1.0), ts, adv, RLConfig(max_new_tokens=16, **kw), pad)
        out[name] = (st["loss"], torch.cat([p.detach().flatten() for p in m.parameters()]))
    for name in ("plain", "kv"):
        assert out["varlen"][0] == pytest.approx(out[name][0], abs=1e-6)
        torch.testing.assert_close(out["varlen"][1], out[name][1], atol=1e-5, rtol=1e-4)


def test_under_gradient_checkpointing_the_update_uses_the_dense_layout(tiny):
    """Backward's recompute of a checkpointed layer would run without the varlen attention switch."""
    from posttrain.config import TrainerConfig
    from posttrain.train.lora import prepare_model
    from posttrain.train.shared_prefix import SharedBatch
    from posttrain.train.update import SampleLayout

    model = prepare_model(copy.deepcopy(tiny[0]), TrainerConfig(gradient_checkpointing=True), 0)
    ts = trajs()
    layout = SampleLayout(model, ts, pack_trajectories(ts, tiny[1]), tiny[1], RLConfig(prefix_layout="varlen"))
    assert isinstance(layout.sb, SharedBatch)


def test_a_model_whose_attention_bypasses_the_interface_is_refused(tiny, monkeypatch):
    """A flat row under the model's own causal attention would give wrong logprobs, silently."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from posttrain.train import varlen

    model, pad = tiny
    monkeypatch.setattr(varlen, "ATTENTION_NAME", "sdpa")  # the switch then leaves the model's attention as is
    monkeypatch.setattr(varlen, "_attention", sdpa_attention_forward)
    ts = trajs()
    with torch.no_grad(), pytest.raises(RuntimeError, match="does not go through"):
        varlen_batch(ts, pack_trajectories(ts, pad).loss_mask.shape[1], pad).logprobs(model)
