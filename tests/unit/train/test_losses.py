"""Policy losses, KL estimators, entropy and clip fraction against hand-computed values.

Shared inputs (old_logp = 0, so ratio = exp(logp)):
    ratio = [[1.5, 0.5], [1.1, 1.0]], adv = [1, -1], mask = [[1, 1], [1, 0]]
"""

import math

import pytest
import torch

from posttrain.registry import registry
from posttrain.train.losses import entropy_from_logits

RATIO = torch.tensor([[1.5, 0.5], [1.1, 1.0]])
LOGP = RATIO.log()
OLD = torch.zeros(2, 2)
ADV = torch.tensor([1.0, -1.0])
MASK = torch.tensor([[1.0, 1.0], [1.0, 0.0]])


def _loss(name, **kw):
    return registry("loss").get(name)(LOGP, OLD, ADV, MASK, **kw)


def test_grpo_sequence_mean_hand_value():
    # seq0: -min(1.5,1.2) = -1.2, -min(.5,.8) = -.5 -> mean -.85; seq1: ratio 1.1 * -1 -> +1.1
    loss, st = _loss("grpo", clip_eps=0.2, clip_eps_high=0.2)
    assert float(loss) == pytest.approx((-0.85 + 1.1) / 2, abs=1e-6)
    assert st["clip_frac"] == pytest.approx(1 / 3)


def test_dapo_token_mean_clip_higher_hand_value():
    # clip-higher 0.28: token 0 becomes -1.28; token mean over the 3 live tokens
    loss, st = _loss("dapo", clip_eps=0.2, clip_eps_high=0.28)
    assert float(loss) == pytest.approx((-1.28 - 0.5 + 1.1) / 3, abs=1e-6)
    assert st["clip_frac"] == pytest.approx(1 / 3)


def test_dapo_asymmetric_clip_low_side():
    # ratio 0.5 with a negative advantage is clipped at 1 - 0.2 = 0.8: -min(-.5, -.8) = .8
    logp = torch.tensor([[math.log(0.5)]])
    loss, st = registry("loss").get("dapo")(logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1),
                                            clip_eps=0.2, clip_eps_high=0.28)
    assert float(loss) == pytest.approx(0.8, abs=1e-6)
    assert st["clip_frac"] == 1.0


def test_dr_grpo_constant_denominator():
    # sum of per-token losses -1.2 - .5 + 1.1 = -.6 over B * max_tokens = 2 * 4
    loss, _ = _loss("dr_grpo", clip_eps=0.2, clip_eps_high=0.2, max_tokens=4)
    assert float(loss) == pytest.approx(-0.6 / 8, abs=1e-6)


def test_gspo_sequence_ratio_hand_value():
    # seq ratios: exp(mean log r) = sqrt(.75) = .8660 and 1.1; adv [-1, 1]; eps .1
    # seq0: -min(-.866, -.9) = .9 (clipped); seq1: -min(1.1, 1.1) = -1.1
    loss, st = registry("loss").get("gspo")(LOGP, OLD, torch.tensor([-1.0, 1.0]), MASK, clip_eps=0.1, clip_eps_high=0.1)
    assert float(loss) == pytest.approx((0.9 - 1.1) / 2, abs=1e-6)
    assert st["clip_frac"] == 0.5


def test_cispo_value_and_stop_gradient_weight():
    # weights min(r, 1.28) = [1.28, .5, 1.1]; per token -w * adv * logp
    logp = LOGP.clone().requires_grad_(True)
    loss, st = registry("loss").get("cispo")(logp, OLD, ADV, MASK, clip_eps_high=0.28)
    want = (-1.28 * math.log(1.5) - 0.5 * math.log(0.5) + 1.1 * math.log(1.1)) / 3
    assert float(loss.detach()) == pytest.approx(want, abs=1e-6)
    assert st["clip_frac"] == pytest.approx(1 / 3)
    loss.backward()  # d/dlogp = -w * adv / 3: the weight is a constant (stop-gradient)
    want_grad = torch.tensor([[-1.28, -0.5], [1.1, 0.0]]) / 3
    assert torch.allclose(logp.grad, want_grad, atol=1e-6)


def test_on_policy_ratio_one_gives_minus_mean_advantage_and_no_clipping():
    for name in ("grpo", "dapo", "gspo"):
        loss, st = registry("loss").get(name)(torch.zeros(2, 2), OLD, ADV, MASK)
        assert st["clip_frac"] == 0.0, name
        # grpo/gspo: mean over sequences of -adv = 0; dapo: token mean (-1 -1 +1)/3
        assert float(loss) == pytest.approx({"grpo": 0.0, "gspo": 0.0, "dapo": -1 / 3}[name], abs=1e-6), name


def test_padding_tokens_do_not_change_any_loss():
    big = LOGP.clone()
    big[1, 1] = 50.0  # a masked token with an absurd ratio
    for name in ("grpo", "dapo", "dr_grpo", "gspo", "cispo"):
        a, _ = _loss(name)
        b, _ = registry("loss").get(name)(big, OLD, ADV, MASK)
        assert float(a) == pytest.approx(float(b), abs=1e-6), name


def test_kl_estimators_hand_values():
    logp, ref = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    kl = registry("kl")
    assert float(kl.get("k1")(logp, ref)) == pytest.approx(math.log(2), abs=1e-6)
    assert float(kl.get("k2")(logp, ref)) == pytest.approx(0.5 * math.log(2) ** 2, abs=1e-6)
    assert float(kl.get("k3")(logp, ref)) == pytest.approx(0.5 + math.log(2) - 1, abs=1e-6)


def test_kl_estimators_zero_when_policy_equals_reference():
    x = torch.randn(3, 5)
    for name in ("k1", "k2", "k3"):
        assert torch.all(registry("kl").get(name)(x, x) == 0), name


def test_k3_is_unbiased_estimate_of_kl():
    # E_{x~p}[k3] = KL(p || ref); p = [.5, .5], ref = [.25, .75] -> KL = .5 ln2 + .5 ln(2/3)
    p, r = torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75])
    est = (p * registry("kl").get("k3")(p.log(), r.log())).sum()
    assert float(est) == pytest.approx(float((p * (p / r).log()).sum()), abs=1e-6)


def test_entropy_hand_values():
    logits = torch.tensor([[[0.0, 0.0], [0.0, math.log(3.0)]]])  # [1, 2, V=2]
    h = entropy_from_logits(logits)
    assert h.shape == (1, 2)
    assert float(h[0, 0]) == pytest.approx(math.log(2), abs=1e-6)
    assert float(h[0, 1]) == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), abs=1e-6)


def test_unknown_loss_name_is_a_config_error_naming_it():
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError, match="nope"):
        registry("loss").get("nope")
