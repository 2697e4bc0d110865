"""One optimizer factory from the config's `optim` sections (train/optim.py)."""

import math
import re
from pathlib import Path

import pytest
import torch

from posttrain.config import OptimConfig, load_config
from posttrain.errors import ConfigError
from posttrain.train.optim import LRSchedule, build_optimizer, build_schedule, lr_factor


def test_each_phase_keeps_the_defaults_its_recorded_results_used():
    cfg = load_config(None)
    assert (cfg.rl.optim.lr, cfg.rl.optim.betas, cfg.rl.optim.warmup, cfg.rl.optim.schedule) == (3e-5, (0.9, 0.99), 20, "constant")
    assert (cfg.sft.optim.lr, cfg.sft.optim.betas, cfg.sft.optim.warmup, cfg.sft.optim.schedule) == (3e-3, (0.9, 0.999), 10, "cosine")
    assert (cfg.dpo.optim.lr, cfg.dpo.optim.weight_decay, cfg.dpo.optim.warmup) == (1e-4, 0.01, 5)


def test_a_partial_section_keeps_the_phases_other_defaults_and_betas_are_keys():
    cfg = load_config(None, ["rl.optim.lr=1e-4", "sft.optim.betas=[0.8, 0.95]"])
    assert cfg.rl.optim.lr == 1e-4 and cfg.rl.optim.betas == (0.9, 0.99) and cfg.rl.optim.warmup == 20
    assert cfg.sft.optim.betas == (0.8, 0.95) and cfg.sft.optim.lr == 3e-3


def test_the_old_keys_still_set_the_optimizer_and_a_later_layer_wins(tmp_path):
    assert load_config(None, ["rl.lr=2e-4", "rl.warmup_steps=3"]).rl.optim.model_dump(include={"lr", "warmup"}) == \
        {"lr": 2e-4, "warmup": 3}
    preset = {"rl": {"lr": 1e-4}}
    assert load_config(None, ["rl.optim.lr=5e-5"], base=preset).rl.optim.lr == 5e-5
    p = tmp_path / "c.yaml"
    p.write_text("rl: {optim: {lr: 7e-5}}\nsft: {weight_decay: 0.1}\n")
    cfg = load_config(p, base=preset)
    assert cfg.rl.optim.lr == 7e-5 and cfg.sft.optim.weight_decay == 0.1


def test_one_key_given_both_ways_with_different_values_is_an_error_naming_both(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rl: {lr: 1e-4, optim: {lr: 2e-4}}\n")
    with pytest.raises(ConfigError, match=r"rl.lr=.* and rl.optim.lr=.* disagree"):
        load_config(p)


@pytest.mark.parametrize("override", ["rl.optim.name=sgd", "rl.optim.schedule=linear", "rl.optim.betas=[0.9, 1.0]",
                                      "rl.optim.lr=0", "rl.optim.eps=0"])
def test_bad_values_fail_at_load_naming_the_key(override):
    with pytest.raises(ConfigError, match=re.escape(override.split("=")[0])):
        load_config(None, [override])


def test_the_factory_builds_adamw_with_every_key():
    p = torch.nn.Parameter(torch.zeros(3))
    opt = build_optimizer([p], OptimConfig(lr=0.5, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1))
    g = opt.param_groups[0]
    assert isinstance(opt, torch.optim.AdamW)
    assert (g["lr"], g["betas"], g["eps"], g["weight_decay"]) == (0.5, (0.8, 0.9), 1e-6, 0.1)


def test_schedules_are_the_ones_the_loops_used_before():
    rl = lr_factor(OptimConfig(warmup=20, schedule="constant"), 200)
    assert [rl(s) for s in (0, 9, 19, 150)] == [min(1.0, (s + 1) / 20) for s in (0, 9, 19, 150)]
    sft = lr_factor(OptimConfig(warmup=10, schedule="cosine"), 600)
    old = lambda s: (s + 1) / 10 if s < 10 else 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (s - 10) / 590)))  # noqa: E731
    assert [sft(s) for s in (0, 5, 10, 300, 600, 700)] == pytest.approx([old(s) for s in (0, 5, 10, 300, 600, 700)])


def test_the_optimizer_free_schedule_matches_lambdalr_and_their_states_swap():
    cfg = OptimConfig(lr=1e-3, warmup=4, schedule="cosine")
    opt = build_optimizer([torch.nn.Parameter(torch.zeros(1))], cfg)
    real, mine = build_schedule(opt, cfg, 10), LRSchedule(cfg, 10)
    for _ in range(6):
        assert mine.lr() == pytest.approx(real.get_last_lr()[0])
        opt.step(), real.step(), mine.step()
    other = LRSchedule(cfg, 10)
    other.load_state_dict(real.state_dict())
    assert other.lr() == pytest.approx(real.get_last_lr()[0])
    fresh = build_schedule(opt, cfg, 10)
    fresh.load_state_dict(mine.state_dict())
    assert fresh.last_epoch == 6 and fresh.get_last_lr()[0] == pytest.approx(mine.lr())


def test_no_trainer_builds_its_own_optimizer_or_schedule():
    root = Path(__file__).resolve().parents[3] / "posttrain" / "train"
    found = [str(f.relative_to(root)) for f in root.rglob("*.py") if f.name != "optim.py" and
             re.search(r"torch\.optim\.(AdamW|Adam|SGD)\(|LambdaLR\(", f.read_text())]
    assert found == ["tower_pretrain.py"]  # its own warm-up and cosine from step 0 (docs/training.md "Optimizer")
