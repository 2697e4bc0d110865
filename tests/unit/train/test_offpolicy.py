"""Off-policy corrections (train/offpolicy.py) against hand-computed values."""

import math

import pytest
import torch

from posttrain.registry import registry
from posttrain.train.offpolicy import mismatch_stats

L = math.log


def _get(name):
    return registry("offpolicy").get(name)


def test_tis_truncates_ratios_above_the_cap_and_ignores_padding():
    trainer = torch.tensor([[L(0.5), L(0.9), L(0.9)]])  # [1, 3]
    behaviour = torch.tensor([[L(0.25), L(0.9), L(0.01)]])  # ratios 2, 1, 90 (the last is padding)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    c = _get("tis")(trainer, behaviour, mask, cap=1.5)
    assert c.weight.flatten().tolist() == pytest.approx([1.5, 1.0, 0.0])
    assert c.clipped_frac == pytest.approx(0.5)  # 1 of the 2 masked tokens; the padding's 90 is not counted
    assert c.masked_frac == 0.0


def test_tis_keeps_ratios_below_the_cap_unchanged():
    trainer, behaviour = torch.tensor([[L(0.2)]]), torch.tensor([[L(0.4)]])
    c = _get("tis")(trainer, behaviour, torch.ones(1, 1), cap=2.0)
    assert c.weight.item() == pytest.approx(0.5)
    assert c.clipped_frac == 0.0


def test_mis_weights_kept_sequences_by_their_product_ratio_and_drops_the_others_whole():
    trainer = torch.tensor([[L(0.5), L(0.1)], [L(0.5), L(0.5)]])
    behaviour = torch.tensor([[L(0.25), L(0.2)], [L(0.25), L(0.25)]])  # row ratios (2, .5) -> 1 ; (2, 2) -> 4
    mask = torch.ones(2, 2)
    c = _get("mis")(trainer, behaviour, mask, cap=2.0)
    assert c.weight.flatten().tolist() == pytest.approx([1.0, 1.0, 0.0, 0.0])
    assert c.masked_frac == pytest.approx(0.5)  # 2 of 4 masked tokens


def test_mis_lower_bound_drops_sequences_whose_ratio_is_too_small():
    trainer, behaviour = torch.tensor([[L(0.1)]]), torch.tensor([[L(0.5)]])  # rho = 0.2
    c = _get("mis")(trainer, behaviour, torch.ones(1, 1), cap=2.0, low=0.5)
    assert c.weight.item() == 0.0 and c.masked_frac == 1.0


def test_icepop_masks_tokens_outside_the_band_and_weights_the_rest_by_their_ratio():
    behaviour = torch.full((1, 4), L(0.1))
    trainer = torch.tensor([[L(0.04), L(0.1), L(0.6), L(0.2)]])  # ratios 0.4, 1, 6, 2
    c = _get("icepop")(trainer, behaviour, torch.ones(1, 4), low=0.5, high=5.0)
    assert c.weight.flatten().tolist() == pytest.approx([0.0, 1.0, 0.0, 2.0])
    assert c.masked_frac == pytest.approx(0.5)


def test_none_is_the_mask_itself():
    mask = torch.tensor([[1.0, 0.0]])
    c = _get("none")(torch.zeros(1, 2), torch.full((1, 2), -3.0), mask)
    assert c.weight.tolist() == [[1.0, 0.0]]


def test_mismatch_stats_mean_abs_diff_and_k3_kl():
    trainer = torch.tensor([[L(0.5), L(0.3), 0.0]])
    behaviour = torch.tensor([[L(0.25), L(0.3), -9.0]])  # d = log 2, 0; the last column is padding
    s = mismatch_stats(trainer, behaviour, torch.tensor([[1.0, 1.0, 0.0]]))
    assert s["logp_abs_diff"] == pytest.approx(L(2) / 2)
    assert s["kl"] == pytest.approx((2 - L(2) - 1) / 2)


def test_corrections_carry_no_gradient():
    trainer = torch.zeros(1, 2, requires_grad=True)
    for name in ("tis", "mis", "icepop", "none"):
        assert not _get(name)(trainer, torch.zeros(1, 2), torch.ones(1, 2)).weight.requires_grad, name
