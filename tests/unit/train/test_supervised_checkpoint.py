"""Supervised checkpoints (train/supervised_checkpoint.py) through the one loop, in this process."""

from __future__ import annotations

import shutil

import pytest
import torch

from posttrain.config import LoraConfig, SFTConfig, TrainerConfig
from posttrain.store.run import RunDir
from posttrain.train.sft import EncodedSFT
from posttrain.train.supervised import LocalSupervisedTrainer, SupervisedRun, train_supervised
from posttrain.train.supervised_checkpoint import SupervisedCheckpoints, trainable_state
from tests.unit.train.sharded.rank_job import sft_items, tiny

CFG = SFTConfig(steps=6, batch_size=4, max_len=64)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(run_dir, steps, every, resume=False, lora=False):
    from posttrain.train.lora import prepare_model

    model, tok = tiny()
    tcfg = TrainerConfig(precision="fp32", lora=LoraConfig(r=4) if lora else None)
    model = prepare_model(model, tcfg, 0)
    trainer = LocalSupervisedTrainer(model, CFG.optim, CFG.steps, tcfg)
    hist = train_supervised(EncodedSFT(sft_items(), CFG, tok.pad_token_id), trainer, steps, seed=3,
                            checkpoints=SupervisedCheckpoints(run_dir, tok, every, resume))
    return model, tok, hist


def test_a_checkpoint_left_half_written_is_ignored_and_resume_starts_after_the_newest_whole_one(tmp_path):
    _train(tmp_path, 4, every=2)  # checkpoints after steps 1 and 3
    run = RunDir(tmp_path)
    half = run.checkpoint_tmp(5)  # a process killed while writing step 5: no manifest, never renamed
    shutil.copytree(run.checkpoint(3), half)
    (half / "manifest.json").unlink()
    model, tok = tiny()
    trainer = LocalSupervisedTrainer(model, CFG.optim, CFG.steps, TrainerConfig(precision="fp32"))
    resumed = SupervisedRun(EncodedSFT(sft_items(), CFG, tok.pad_token_id), trainer, CFG.steps, seed=3)
    SupervisedCheckpoints(tmp_path, tok, 2, resume=True).restore(resumed)
    assert len(resumed.history) == 4  # steps 0..3 restored: the next step is 4, from step-3's state


@pytest.mark.parametrize("lora", [False, True])
def test_resumed_run_ends_at_the_uninterrupted_weights(tmp_path, lora):
    whole, _, _ = _train(tmp_path / "whole", CFG.steps, every=0, lora=lora)
    _train(tmp_path / "cut", 3, every=0, lora=lora)  # a run stopped after step 2: its end checkpoint is step-2
    resumed, _, hist = _train(tmp_path / "cut", CFG.steps, every=0, resume=True, lora=lora)
    assert len(hist) == CFG.steps
    want, got = trainable_state(whole), trainable_state(resumed)
    assert want.keys() == got.keys()
    for k, v in want.items():
        assert torch.equal(got[k], v), k
