"""Advantage estimators against hand-computed values."""

import math

import pytest
import torch

from posttrain.registry import registry

R = torch.tensor([[1.0, 0.0, 0.0, 1.0]])  # mean .5, unbiased std sqrt(1/3)


def _adv(name, r):
    return registry("advantage").get(name)(r)


def test_group_norm_hand_value():
    want = 0.5 / math.sqrt(1 / 3)
    assert torch.allclose(_adv("group_norm", R), torch.tensor([[want, -want, -want, want]]), atol=1e-5)


def test_group_mean_hand_value():
    assert torch.allclose(_adv("group_mean", R), torch.tensor([[0.5, -0.5, -0.5, 0.5]]))


def test_rloo_leave_one_out_hand_value():
    # r=1: 1 - mean(0, 0, 1) = 2/3; r=0: 0 - mean(1, 0, 1) = -2/3
    assert torch.allclose(_adv("rloo", R), torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3]]), atol=1e-6)


def test_reinforce_pp_batch_normalised_hand_value():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    # group baselines -> [.5,-.5,-.5,.5], [.25,.25,.25,-.75]; batch mean 0, unbiased std sqrt(1.75/7) = .5
    want = torch.tensor([[1.0, -1.0, -1.0, 1.0], [0.5, 0.5, 0.5, -1.5]])
    assert torch.allclose(_adv("reinforce_pp", r), want, atol=1e-5)


def test_constant_group_gives_zero_advantage_everywhere():
    r = torch.full((2, 4), 0.7)
    for name in ("group_norm", "group_mean", "rloo", "reinforce_pp"):
        assert torch.allclose(_adv(name, r), torch.zeros(2, 4), atol=1e-6), name


def test_single_sample_groups_do_not_divide_by_zero():
    r = torch.tensor([[1.0], [0.0]])
    for name in ("group_norm", "group_mean", "rloo"):
        out = _adv(name, r)
        assert torch.isfinite(out).all() and torch.all(out == 0), name
