"""The quickstart's SFT stop rule: validation pass@1 on the RL pool, never the held-out split."""

import asyncio
import json

from posttrain.config import load_config
from posttrain.eval.heldout import HeldoutResult
from posttrain.recipes.quickstart import make_splits, sft_phase

SMALL = ["tasks.domains.arithmetic.n_train=40", "tasks.domains.code.n_train=40", "tasks.domains.arithmetic.n_eval=8",
         "tasks.domains.code.n_eval=8", "sft.steps=10", "sft.batch_size=4", "recipe.rl.check_every=2",
         "recipe.rl.stop_at_pass=0.5", "recipe.rl.val_per_domain=5", "threads=1"]


def scripted_validation(monkeypatch, levels):
    seen = []

    async def fake(engine, tok, tasks, runner, *args, **kwargs):
        seen.append([t.id for t in tasks])
        level = levels[len(seen) - 1]
        n_pass = round(level * len(tasks))
        return HeldoutResult({t.id: i < n_pass for i, t in enumerate(tasks)}, {t.id: "arithmetic" for t in tasks})

    monkeypatch.setattr("posttrain.eval.heldout.evaluate_heldout_mixed", fake)
    return seen


def test_sft_stops_at_the_first_check_that_reaches_the_target(tmp_path, monkeypatch):
    seen = scripted_validation(monkeypatch, [0.1, 0.3, 0.6, 0.9, 0.9])
    cfg = load_config(None, SMALL)
    asyncio.run(sft_phase(cfg, tmp_path, make_splits(cfg), lambda p, i: None, runner=None))
    checks = json.loads((tmp_path / "sft_checks.json").read_text())["checks"]
    assert [c["step"] for c in checks] == [2, 4, 6]
    assert len(json.loads((tmp_path / "sft_losses.json").read_text())) == 6
    assert (tmp_path / "sft-model" / "config.json").is_file()


def test_sft_validation_never_looks_at_held_out_tasks(tmp_path, monkeypatch):
    seen = scripted_validation(monkeypatch, [0.0] * 5)
    cfg = load_config(None, SMALL)
    splits = make_splits(cfg)
    asyncio.run(sft_phase(cfg, tmp_path, splits, lambda p, i: None, runner=None))
    assert len(seen) == 5  # never reached: every check ran, through the last step
    held = {t.id for t in splits.held_out} | {t.id for t in splits.sft}
    assert seen[0] and not set(seen[0]) & held


def test_sft_keeps_the_checkpoint_closer_to_the_target_when_the_curve_jumps(tmp_path, monkeypatch):
    scripted_validation(monkeypatch, [0.1, 0.45, 0.9, 0.9, 0.9])
    cfg = load_config(None, SMALL)
    asyncio.run(sft_phase(cfg, tmp_path, make_splits(cfg), lambda p, i: None, runner=None))
    d = json.loads((tmp_path / "sft_checks.json").read_text())
    assert [c["step"] for c in d["checks"]] == [2, 4, 6]
    assert d["kept_step"] == 4  # 0.45 is 0.05 from 0.5; 0.9 is 0.4 past it


def test_the_warm_up_trains_lora_adapters_when_the_trainer_has_them(tmp_path):
    """trainer.lora holds for the warm-up too: only the targeted projections move, merged into a plain sft-model."""
    import torch

    from posttrain.models import load_policy
    from posttrain.models.base import build_base

    cfg = load_config(None, [*SMALL, "recipe.rl.stop_at_pass=null", "sft.steps=3", "sft.optim.lr=5e-2",
                             "trainer.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}"])
    base = {k: v.clone() for k, v in build_base(cfg, tmp_path)[0].state_dict().items()}
    model, _ = asyncio.run(sft_phase(cfg, tmp_path, make_splits(cfg), lambda p, i: None, runner=None))
    saved = load_policy(tmp_path / "sft-model")[0].state_dict()
    assert set(saved) == set(base) and not (tmp_path / "sft-model" / "adapter_config.json").exists()
    moved = {k for k in base if not torch.equal(base[k], saved[k])}
    assert moved and all(".q_proj." in k or ".v_proj." in k for k in moved)
    assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items())  # returned = saved
