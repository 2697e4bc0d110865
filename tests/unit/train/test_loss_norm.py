"""rl.loss_norm: the token-mean denominator as a named choice, against hand-computed values.

Shared inputs (as test_losses.py; old_logp = 0, so ratio = exp(logp)):
    ratio = [[1.5, 0.5], [1.1, 1.0]], adv = [1, -1], mask = [[1, 1], [1, 0]]
dapo (clip 0.2 / 0.28) per-token terms on the live tokens: -1.28, -0.5, +1.1 (sum -0.68).
The step sampled 6 scored samples with 10 tokens; the 2 kept ones (above) hold 3.
"""

import pytest
import torch

from posttrain.config import load_config
from posttrain.config_check import check_config, check_sharded
from posttrain.errors import ConfigError
from posttrain.registry import registry
from posttrain.train.loss_norm import StepCounts, denominator, step_counts
from posttrain.types import Trajectory, Turn, VerifyResult

RATIO = torch.tensor([[1.5, 0.5], [1.1, 1.0]])
LOGP, OLD = RATIO.log(), torch.zeros(2, 2)
ADV = torch.tensor([1.0, -1.0])
MASK = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
SUM = -1.28 - 0.5 + 1.1
COUNTS = StepCounts(all_samples=6, all_tokens=10, kept_samples=2, kept_tokens=3)


def dapo(denom):
    return float(registry("loss").get("dapo")(LOGP, OLD, ADV, MASK, clip_eps=0.2, clip_eps_high=0.28, denom=denom)[0])


def test_kept_tokens_is_the_losses_own_mean_over_the_kept_tokens():
    assert denominator("kept_tokens", MASK, COUNTS, 24) is None
    assert dapo(None) == pytest.approx(SUM / 3, abs=1e-6)


def test_all_tokens_divides_by_every_sampled_token_dropped_groups_included():
    d = denominator("all_tokens", MASK, COUNTS, 24)
    assert d == 10  # 3 kept + 7 dropped
    assert dapo(d) == pytest.approx(SUM / 10, abs=1e-6)


def test_constant_divides_by_samples_times_the_budget():
    d = denominator("constant", MASK, COUNTS, 24)
    assert d == 6 * 24
    assert dapo(d) == pytest.approx(SUM / 144, abs=1e-6)


def test_a_minibatch_takes_its_share_of_the_dropped_tokens_by_rows():
    one_row = MASK[:1]  # 2 tokens, half of the kept rows: half of the 7 dropped tokens
    assert denominator("all_tokens", one_row, COUNTS, 24) == pytest.approx(2 + 3.5)
    assert denominator("constant", one_row, COUNTS, 24) == pytest.approx(3 * 24)


def test_cispo_takes_the_denominator_too():
    fn = registry("loss").get("cispo")
    a = float(fn(LOGP, OLD, ADV, MASK)[0])
    b = float(fn(LOGP, OLD, ADV, MASK, denom=10.0)[0])
    assert b == pytest.approx(a * 3 / 10, rel=1e-6)


def _traj(n, infra=False, group=0):
    verify = VerifyResult.infra("down") if infra else VerifyResult(0.0, False, {})
    return Trajectory("t", "v", "d", (1,), (Turn("assistant", "x", tuple(range(n)), (0.0,) * n),), verify=verify,
                      group=group)


def test_step_counts_skip_infra_errors():
    sampled = [_traj(2), _traj(3), _traj(4, group=1), _traj(9, infra=True, group=1)]
    assert step_counts(sampled, sampled[2:]) == StepCounts(all_samples=3, all_tokens=9, kept_samples=1, kept_tokens=4)


@pytest.mark.parametrize("loss", ["grpo", "gspo", "dr_grpo"])
def test_a_loss_that_is_not_a_token_mean_refuses_another_normaliser(loss):
    cfg = load_config(None, [f"rl.loss={loss}", "rl.loss_norm=all_tokens"])
    with pytest.raises(ConfigError, match=f"rl.loss_norm=all_tokens: rl.loss='{loss}'"):
        check_config(cfg, needs=("rl",))


def test_the_sharded_trainer_refuses_another_normaliser():
    cfg = load_config(None, ["rl.loss_norm=constant", "trainer.world_size=2"])
    with pytest.raises(ConfigError, match="rl.loss_norm=constant"):
        check_sharded(cfg)


def test_the_builtin_losses_declare_which_take_a_denominator():
    from posttrain.registry import registry

    declared = {n: registry("loss").props(n)["normalisable"] for n in ("grpo", "dapo", "dr_grpo", "gspo", "cispo")}
    assert declared == {"grpo": False, "dapo": True, "dr_grpo": False, "gspo": False, "cispo": True}


def test_a_plugin_loss_takes_a_normaliser_only_when_it_declares_one():
    # the declared property decides, not the signature: both plugins take `denom`
    from posttrain.registry import loss

    @loss("test_norm_declared", units="tokens", normalisable=True)
    def declared(logp, old_logp, adv, mask, denom=None, **_): ...

    @loss("test_norm_undeclared", units="tokens")
    def undeclared(logp, old_logp, adv, mask, denom=None, **_): ...

    check_config(load_config(None, ["rl.loss=test_norm_declared", "rl.loss_norm=all_tokens"]), needs=("rl",))
    with pytest.raises(ConfigError, match="rl.loss_norm=all_tokens: rl.loss='test_norm_undeclared'"):
        check_config(load_config(None, ["rl.loss=test_norm_undeclared", "rl.loss_norm=all_tokens"]), needs=("rl",))
