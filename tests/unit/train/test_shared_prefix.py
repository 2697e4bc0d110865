"""The shared-prefix update layout gives the plain layout's logprobs, entropies and gradients."""

from __future__ import annotations

import pytest
import torch

from posttrain.train.batching import pack_trajectories, token_logprobs
from posttrain.train.losses import entropy_from_logits
from posttrain.train.shared_prefix import share_prefixes
from posttrain.types import Trajectory, Turn


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    torch.manual_seed(0)
    model, tok = build_tiny()
    return model.eval(), tok


def trajs(tok, sizes=((0, 3), (0, 5), (0, 1), (1, 4), (1, 2), (2, 6))):
    """Trajectories over three prompts (the third alone), with tails of different lengths,
    one of them two turns (an assistant turn and an untrained observation)."""
    prompts = [(5, 6, 7, 8), (9, 10), (11, 12, 13, 14, 15, 16)]
    out = []
    for k, (p, n) in enumerate(sizes):
        toks = tuple(20 + (k * 7 + j) % 30 for j in range(n))
        turns = (Turn("assistant", "", toks, (0.0,) * n),)
        if k == 1:
            turns += (Turn("tool", "", (40, 41), (), trainable=False), Turn("assistant", "", (42,), (0.0,)))
        out.append(Trajectory(f"t{p}", "v", "d", prompts[p], turns, group=p, sample=k))
    return out


def test_logprobs_and_entropy_match_the_plain_layout(tiny):
    """All three groups packed into one row: each block attends only within itself."""
    model, tok = tiny
    ts = trajs(tok)
    tb = pack_trajectories(ts, tok.pad_token_id)
    with torch.no_grad():
        plain, logits = token_logprobs(model, tb.input_ids, tb.attention_mask, with_logits=True)
        shared, ent = share_prefixes(ts, tb.loss_mask.shape[1], tok.pad_token_id).logprobs(model)
    m = tb.loss_mask
    assert torch.allclose(plain * m, shared * m, atol=1e-5)
    assert torch.allclose(entropy_from_logits(logits) * m, ent * m, atol=1e-5)


def test_gradients_match_the_plain_layout(tiny):
    model, tok = tiny
    ts = trajs(tok)
    tb = pack_trajectories(ts, tok.pad_token_id)
    w = torch.randn(tb.loss_mask.shape)

    def grads(fn):
        model.zero_grad()
        (fn() * tb.loss_mask * w).sum().backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    a = grads(lambda: token_logprobs(model, tb.input_ids, tb.attention_mask)[0])
    b = grads(lambda: share_prefixes(ts, tb.loss_mask.shape[1], tok.pad_token_id).logprobs(model)[0])
    assert len(a) == len(b) and all(torch.allclose(x, y, atol=1e-5, rtol=1e-4) for x, y in zip(a, b))


def test_long_groups_split_into_rows_that_repeat_the_prompt(tiny):
    model, tok = tiny
    ts = trajs(tok)
    tb = pack_trajectories(ts, tok.pad_token_id)
    sb = share_prefixes(ts, tb.loss_mask.shape[1], tok.pad_token_id, max_row=10, row_tokens=1)  # a block per row
    assert sb.input_ids.shape[0] > 3 and sb.input_ids.shape[1] <= 12
    with torch.no_grad():
        plain = token_logprobs(model, tb.input_ids, tb.attention_mask)[0]
        assert torch.allclose(plain * tb.loss_mask, sb.logprobs(model)[0] * tb.loss_mask, atol=1e-5)


def test_nothing_shared_means_the_plain_layout(tiny):
    _, tok = tiny
    ts = trajs(tok, sizes=((0, 3), (1, 2), (2, 4)))
    assert share_prefixes(ts, 16, tok.pad_token_id) is None


def test_shared_layout_computes_fewer_tokens_for_a_group(tiny):
    _, tok = tiny
    ts = trajs(tok, sizes=tuple((0, 6) for _ in range(8)))
    tb = pack_trajectories(ts, tok.pad_token_id)
    sb = share_prefixes(ts, tb.loss_mask.shape[1], tok.pad_token_id, row_tokens=1)
    tails = sum(len(x.token_ids) for t in ts for x in t.turns)  # 8 x 6, plus 3 for the two-turn sample
    assert sb.input_ids.numel() == 4 + tails and tb.input_ids.numel() == 8 * (4 + 9)
