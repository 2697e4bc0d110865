"""An RL run resumes from the newest intact checkpoint when the latest one is truncated."""

from __future__ import annotations

import asyncio
import copy

import pytest
import torch

from posttrain.config import load_config

_OVERRIDES = [
    "seed=3", "rl.steps=4", "rl.prompts_per_step=2", "rl.group_size=2", "rl.max_new_tokens=4",
    "rl.checkpoint_every=2", "rl.keep_checkpoints=4", "rl.loss=grpo",
    "tasks.domains={arithmetic: {n_train: 8, n_eval: 2}}", "model.tiny.hidden_size=32",
    "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["model.safetensors", "trainer_state.pt"])
def test_resume_skips_a_truncated_latest_checkpoint_and_says_so(tmp_path, capsys, name):
    from posttrain.models.tiny import build_tiny
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.rl import build_state, train_rl

    torch.set_num_threads(1)
    cfg = load_config(None, _OVERRIDES)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = make_splits(cfg).train
    st = build_state(cfg, tmp_path, copy.deepcopy(model), tok, train, train[:2], None)
    asyncio.run(train_rl(st))
    st.metrics.close(), st.store.close()
    latest = tmp_path / "checkpoints" / "step-3"
    p = latest / name
    p.write_bytes(p.read_bytes()[:100])
    capsys.readouterr()

    st = build_state(cfg, tmp_path, copy.deepcopy(model), tok, train, train[:2], None, resume=True)
    st.metrics.close(), st.store.close()
    assert st.step == 2  # resumed after step 1, the checkpoint before the broken one
    err = capsys.readouterr().err
    assert f"skipping checkpoint {latest}: {name} is 100 bytes" in err
