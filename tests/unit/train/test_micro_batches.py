"""rl.micro_tokens: a minibatch's backward in micro-batches gives the gradient of one backward.

Each built-in loss is checked, because the exactness rests on a property of the loss (a sum
over rows whose normalisers depend on the masks only); a loss that normalised by, say, the
batch's own logprobs would fail here. fp32, tolerance 1e-6 absolute + 1e-5 relative.
"""

from __future__ import annotations

import pytest
import torch

from posttrain.config import RLConfig
from posttrain.train.update import micro_batches, update_policy
from posttrain.types import Trajectory, Turn

LOSSES = ["grpo", "dapo", "dr_grpo", "gspo", "cispo"]


@pytest.fixture(scope="module")
def tiny():
    from posttrain.models.tiny import build_tiny

    model, tok = build_tiny(seed=0)
    return model, tok.pad_token_id


def batch() -> list[Trajectory]:
    """Three prompts of 4, 9 and 2 tokens, 3-4 samples each, of 2-9 tokens; old logprobs off
    the policy's so the clipped losses clip some tokens."""
    g = torch.Generator().manual_seed(3)
    out = []
    for p, (plen, k) in enumerate(((4, 4), (9, 3), (2, 4))):
        prompt = tuple(range(20 + p, 20 + p + plen))
        for s in range(k):
            n = 2 + (3 * s + p) % 8
            toks = tuple(int(x) for x in torch.randint(12, 108, (n,), generator=g))
            lps = tuple(float(x) for x in -torch.rand(n, generator=g) * 4)
            out.append(Trajectory(f"t{p}", "v", "d", prompt, (Turn("assistant", "", toks, lps),), group=p, sample=s))
    return out


def grads_after(model, pad, trajs, **rl):
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    adv = torch.linspace(-1.5, 1.5, len(trajs))
    stats = update_policy(model, opt, trajs, adv, RLConfig(max_grad_norm=1e9, **rl), pad)
    return [p.grad.clone() for p in model.parameters() if p.grad is not None], stats


@pytest.mark.parametrize("loss", LOSSES)
def test_micro_batched_gradients_equal_one_backward(tiny, loss):
    one, _ = grads_after(*tiny, batch(), loss=loss)
    micro, _ = grads_after(*tiny, batch(), loss=loss, micro_tokens=30)
    assert len(one) == len(micro) > 0
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-5) for a, b in zip(one, micro))


def test_micro_batched_statistics_equal_one_backward(tiny):
    _, one = grads_after(*tiny, batch())
    _, micro = grads_after(*tiny, batch(), micro_tokens=30)
    assert one.keys() == micro.keys()
    from posttrain.train.update import UPDATE_CLOCK  # wall-clock seconds, not statistics

    assert all(abs(one[k] - micro[k]) <= 1e-5 * max(1.0, abs(one[k])) for k in one if k != "grad_norm" and k not in UPDATE_CLOCK)


def test_micro_batched_kl_gradients_equal_one_backward(tiny):
    from posttrain.models.tiny import build_tiny

    ref, _ = build_tiny(seed=1)
    model, pad = tiny
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    adv = torch.zeros(len(batch()))  # only the KL term moves the weights
    out = []
    for micro in (0, 30):
        cfg = RLConfig(max_grad_norm=1e9, kl_coef=0.5, micro_tokens=micro)
        st = update_policy(model, opt, batch(), adv, cfg, pad, ref_model=ref.eval())
        out.append(([p.grad.clone() for p in model.parameters() if p.grad is not None], st["kl"]))
    (a, kl_a), (b, kl_b) = out
    assert abs(kl_a - kl_b) < 1e-6 and all(torch.allclose(x, y, atol=1e-6, rtol=1e-5) for x, y in zip(a, b))


def test_micro_batches_cover_every_sample_once():
    chunks = micro_batches(batch(), 30)
    assert sorted(i for c in chunks for i in c) == list(range(len(batch()))) and len(chunks) > 1


def test_micro_batches_keep_groups_whole_and_within_the_limit():
    """A group split would run its prompt twice; a group over the limit runs alone."""
    trajs = batch()
    for c in micro_batches(trajs, 30):
        prompts = {trajs[i].prompt_ids for i in c}
        size = {p: sum(t.prompt_ids == p for t in trajs) for p in prompts}
        tokens = sum(len(p) for p in prompts) + sum(len(trajs[i].turns[0].token_ids) for i in c)
        assert all(sum(trajs[i].prompt_ids == p for i in c) == size[p] for p in prompts)
        assert len(prompts) == 1 or tokens <= 30


def test_zero_means_one_micro_batch():
    assert micro_batches(batch(), 0) == [list(range(len(batch())))]


def test_the_update_reports_its_time_split_and_the_loop_logs_it_under_time(tiny):
    from posttrain.train.update import UPDATE_CLOCK, metric_name

    _, stats = grads_after(*tiny, batch(), micro_tokens=30)  # several micro-batches: the clock sums them
    assert all(stats[k] > 0.0 for k in UPDATE_CLOCK)
    assert [metric_name(k) for k in (*UPDATE_CLOCK, "loss")] == \
        ["time/forward_s", "time/backward_s", "time/optimizer_s", "train/loss"]
