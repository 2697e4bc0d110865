"""rl.max_staleness / rl.offpolicy / rl.partial_rollouts are refused at load with one line, and the drift guard."""

import pytest

from posttrain.config import load_config
from posttrain.config_check import check_config
from posttrain.errors import ConfigError


@pytest.mark.parametrize("overrides,expect", [
    (["rl.max_staleness=-1"], "'rl.max_staleness' in defaults (with overrides rl.max_staleness=-1): Input should be greater than or equal to 0"),
    (["rl.offpolicy.name=tiss"], "rl.offpolicy.name='tiss' is not a registered offpolicy (did you mean 'tis'?); known: icepop, mis, none, tis"),
    (["rl.partial_rollouts=true"], "rl.partial_rollouts=true needs rl.max_staleness >= 1"),
    (["rl.partial_rollouts=true", "rl.max_staleness=1", "engine.name=hf"],
     "engine.name='hf' cannot take new weights in the middle of a batch"),
    (["rl.max_staleness=2", "cluster.address=auto", "cluster.staleness=1"],
     "rl.max_staleness=2 with cluster.staleness=1: the asynchronous loop bounds staleness itself"),
])
def test_bad_async_settings_are_one_line_config_errors(overrides, expect):
    with pytest.raises(ConfigError) as e:
        check_config(load_config(None, overrides), needs=("rl",))
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_valid_async_settings_pass():
    check_config(load_config(None, ["rl.max_staleness=4", "rl.offpolicy={name: icepop, args: {low: 0.5, high: 3}}"]),
                 needs=("rl",))
    check_config(load_config(None, ["rl.max_staleness=1", "rl.partial_rollouts=true"]), needs=("rl",))  # fast can
    # and so can the Ray rollout workers (their fast engines take offers mid-batch: distributed/offers.py)
    check_config(load_config(None, ["rl.max_staleness=1", "rl.partial_rollouts=true", "cluster.address=auto"]),
                 needs=("rl",))


def test_drift_guard_warns_once_per_window_and_stop_raises(capsys):
    from posttrain.config import OffPolicyConfig
    from posttrain.train.async_rl.guard import DriftGuard, OffPolicyDriftExceeded

    g = DriftGuard(OffPolicyConfig(max_kl=0.1))
    assert g.observe(0, {"train/offpolicy/kl": 0.05}) is None
    assert "above rl.offpolicy.max_kl=0.1" in g.observe(1, {"train/offpolicy/kl": 0.3})
    assert g.observe(2, {"train/offpolicy/kl": 0.3}) is None  # once per window
    assert "WARNING" in capsys.readouterr().err
    with pytest.raises(OffPolicyDriftExceeded, match="the run stopped"):
        DriftGuard(OffPolicyConfig(max_kl=0.1, action="stop")).observe(3, {"train/offpolicy/kl": 0.3})
