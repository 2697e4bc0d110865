"""Advantage estimators against hand-computed values."""

import math

import pytest
import torch

from posttrain.registry import registry
from posttrain.train.advantages import estimate_advantages
from posttrain.types import Trajectory, Turn, VerifyResult

R = torch.tensor([[1.0, 0.0, 0.0, 1.0]])  # mean .5, unbiased std sqrt(1/3)


def _adv(name, r, mask=None):
    return registry("advantage").get(name)(r, torch.ones_like(r, dtype=torch.bool) if mask is None else mask)


def _traj(grp: int, sample: int, reward: float, infra: bool = False) -> Trajectory:
    v = VerifyResult.infra("down") if infra else VerifyResult(reward, reward > 0.5)
    return Trajectory("t", "v", "d", (1,), (Turn("assistant", "x", (1,), (-0.1,)),), reward=reward, verify=v,
                      group=grp, sample=sample)


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


# a [2, 4] batch padded from groups of 4 and 3 scored samples ([1, 0, 0, 1] and [1, 1, 0]);
# the padding holds a reward that would change every statistic if it leaked in
PADDED = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 9.0]])
MASK = torch.tensor([[True, True, True, True], [True, True, True, False]])


def test_masked_group_mean_ignores_padding():
    # group 2: mean 2/3 -> [1/3, 1/3, -2/3], padding 0
    want = torch.tensor([[0.5, -0.5, -0.5, 0.5], [1 / 3, 1 / 3, -2 / 3, 0.0]])
    assert torch.allclose(_adv("group_mean", PADDED, MASK), want, atol=1e-6)


def test_masked_group_norm_uses_the_scored_count_for_the_unbiased_std():
    # group 2: deviations [1/3, 1/3, -2/3], sum of squares 2/3, / (3 - 1) -> std sqrt(1/3)
    s1, s2 = math.sqrt(1 / 3), math.sqrt(1 / 3)
    want = torch.tensor([[0.5 / s1, -0.5 / s1, -0.5 / s1, 0.5 / s1], [(1 / 3) / s2, (1 / 3) / s2, (-2 / 3) / s2, 0.0]])
    assert torch.allclose(_adv("group_norm", PADDED, MASK), want, atol=1e-5)


def test_masked_rloo_leaves_out_one_of_the_scored_samples():
    # group 2: r=1 -> 1 - mean(1, 0) = 1/2; r=0 -> 0 - mean(1, 1) = -1
    want = torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3], [0.5, 0.5, -1.0, 0.0]])
    assert torch.allclose(_adv("rloo", PADDED, MASK), want, atol=1e-6)


def test_masked_reinforce_pp_normalises_over_the_seven_scored_samples():
    # centred [.5,-.5,-.5,.5, 1/3,1/3,-2/3]: mean 0, sum of squares 1 + 2/3, unbiased std sqrt((5/3)/6)
    std = math.sqrt((5 / 3) / 6)
    want = torch.tensor([[0.5, -0.5, -0.5, 0.5], [1 / 3, 1 / 3, -2 / 3, 0.0]]) / std
    want[1, 3] = 0.0
    assert torch.allclose(_adv("reinforce_pp", PADDED, MASK), want, atol=1e-5)


def test_estimate_advantages_is_one_batch_call_so_reinforce_pp_is_not_group_norm():
    # groups [1, 0] (std .71) and [1, 0.9, 0.9, 0.8] (std .08): group_norm scales each group to
    # unit std; reinforce_pp scales the batch once, so the quiet group keeps small advantages
    groups = [[_traj(0, 0, 1.0), _traj(0, 1, 0.0)], [_traj(1, i, r) for i, r in enumerate([1.0, 0.9, 0.9, 0.8])]]
    gn, pp = estimate_advantages(groups, "group_norm"), estimate_advantages(groups, "reinforce_pp")
    centred = torch.tensor([0.5, -0.5, 0.1, 0.0, 0.0, -0.1])  # r - group mean, group-major
    assert torch.allclose(pp, centred / centred.std(), atol=1e-5)
    assert abs(pp[2]) < 0.4 < abs(gn[2])  # 0.1 / .41 vs 0.1 / .08


def test_estimate_advantages_gives_zero_to_infra_errors_and_baseline_less_groups():
    groups = [[_traj(0, 0, 1.0), _traj(0, 1, 0.0, infra=True), _traj(0, 2, 0.0)],  # 2 scored, unequal sizes
              [_traj(1, 0, 1.0), _traj(1, 1, 0.0, infra=True)]]  # 1 scored: no baseline
    adv = estimate_advantages(groups, "group_mean")
    assert adv.tolist() == [0.5, 0.0, -0.5, 0.0, 0.0]


@pytest.mark.parametrize("name", ["group_norm", "group_mean", "rloo", "reinforce_pp"])
def test_declared_scope_matches_what_the_estimator_does(name):
    # scope="group": each group gets what it would get alone; scope="batch": it does not
    alone = torch.cat([_adv(name, PADDED[i : i + 1], MASK[i : i + 1]) for i in range(2)])
    same = torch.allclose(_adv(name, PADDED, MASK), alone, atol=1e-6)
    assert same == (registry("advantage").props(name)["scope"] == "group")


def test_an_estimator_without_its_declared_properties_fails_when_it_registers():
    from posttrain.registry import advantage

    with pytest.raises(ValueError, match="must declare scope="):
        registry("advantage").register("test_no_scope", min_group=2)
    with pytest.raises(ValueError, match="scope='sample' is not one of 'group', 'batch'"):
        advantage("test_bad_scope", min_group=2, scope="sample")
    with pytest.raises(TypeError):
        advantage("test_no_props")  # the typed decorator: a missing keyword is a TypeError at once
    assert "test_no_scope" not in registry("advantage") and "test_bad_scope" not in registry("advantage")
