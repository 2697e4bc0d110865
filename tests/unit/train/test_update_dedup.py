"""Identical samples computed once in the update give the same loss and gradients as separate rows."""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.config import RLConfig
from posttrain.registry import registry
from posttrain.train.batching import pack_trajectories
from posttrain.train.update import policy_logprobs, unique_samples
from posttrain.types import Trajectory, Turn


def batch():
    """Two groups of 4; group 0 repeats one answer three times, group 1 repeats two answers twice."""
    answers = [(7, 8, 2), (7, 8, 2), (9, 2), (7, 8, 2), (11, 12, 13, 2), (14, 2), (11, 12, 13, 2), (14, 2)]
    out = []
    for k, ans in enumerate(answers):
        g = k // 4
        prompt = (5, 6, 7) if g == 0 else (5, 9)
        lps = tuple(-0.1 * (j + 1) - 0.01 * k for j in range(len(ans)))  # each sample its own engine logprobs
        out.append(Trajectory(f"t{g}", f"v{g}", "d", prompt, (Turn("assistant", "", ans, lps),), group=g, sample=k))
    return out


def test_unique_samples_maps_every_sample_to_its_distinct_copy():
    uniq, inv = unique_samples(batch())
    assert len(uniq) == 4 and inv.tolist() == [0, 0, 1, 0, 2, 3, 2, 3]


@pytest.mark.parametrize("share", [True, False])
def test_dedup_gives_the_same_loss_and_gradients(share):
    from posttrain.models.tiny import build_tiny

    torch.manual_seed(0)
    model, tok = build_tiny()
    trajs, adv = batch(), torch.tensor([1.0, 1.0, -3.0, 1.0, 0.5, -0.5, 0.5, -0.5])
    tb = pack_trajectories(trajs, tok.pad_token_id)
    loss_fn = registry("loss").get("dapo")

    def run(dedup: bool):
        m = copy.deepcopy(model)
        cfg = RLConfig(share_prefix=share, dedup_samples=dedup)
        logp, ent = policy_logprobs(m, trajs, tb, tok.pad_token_id, cfg)
        loss, _ = loss_fn(logp, tb.old_logp, adv, tb.loss_mask)
        loss.backward()
        return float(loss.detach()), [p.grad for p in m.parameters()], ent

    la, ga, ea = run(True)
    lb, gb, eb = run(False)
    assert abs(la - lb) < 1e-6 and torch.allclose(ea * tb.loss_mask, eb * tb.loss_mask, atol=1e-5)
    assert all(torch.allclose(x, y, atol=1e-6, rtol=1e-4) for x, y in zip(ga, gb))
