"""The one supervised loop (train/supervised.py): every data kind and both executions go through it."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch

from posttrain.config import DPOConfig, SFTConfig, TrainerConfig
from posttrain.train.supervised import LocalSupervisedTrainer, SupervisedRun, train_supervised
from tests.unit.train.sharded.rank_job import dpo_pairs, sft_items, tiny

ROOT = Path(__file__).resolve().parents[3] / "posttrain"


@pytest.fixture(autouse=True)
def _one_thread(tmp_path, monkeypatch, one_torch_thread):
    monkeypatch.setenv("POSTTRAIN_IMAGE_DIR", str(tmp_path / "image-cache"))  # image tasks write here, not ~/.cache


@pytest.fixture(scope="module")
def vlm():
    from posttrain.models.vlm import build_tiny_vlm

    return build_tiny_vlm(seed=0)


def _image_tasks(name, n):
    from posttrain.registry import build

    return build(name, kind="domain", size=32).generate(n, 2, 1.0)


def _text_demos(model, tok):
    from posttrain.train.sft import sft_train
    from posttrain.types import Message

    return sft_train(model, tok, [((Message("user", f"{i}+{i}="),), str(2 * i)) for i in range(6)],
                     SFTConfig(steps=2, batch_size=4))


def _chat_items(model, tok):
    from posttrain.train.sft import train_encoded

    return train_encoded(model, tok.pad_token_id, sft_items(), SFTConfig(steps=2, batch_size=4, max_len=64),
                         TrainerConfig(precision="fp32"))


def _text_pairs(model, tok):
    from posttrain.train.dpo import reference_logprobs, train_dpo

    pairs = dpo_pairs()
    return train_dpo(model, pairs, reference_logprobs(model, pairs, tok.pad_token_id, 64),
                     DPOConfig(steps=2, batch_size=4, max_len=64), TrainerConfig(precision="fp32"), tok.pad_token_id)


def _image_sft(model, tok):
    from posttrain.train.vision_sft import vision_sft_train

    return vision_sft_train(model, tok, _image_tasks("drawing", 4), SFTConfig(steps=2, batch_size=2))


def _image_pairs(model, tok):
    from posttrain.train.dpo import reference_logprobs, train_dpo
    from posttrain.train.vision_dpo import image_pairs

    tasks = _image_tasks("chart", 4)
    pairs, _ = image_pairs(tok, tasks, lambda t: next(a.oracle for a in tasks if a.oracle != t.oracle))
    return train_dpo(model, pairs, reference_logprobs(model, pairs, tok.pad_token_id, 512),
                     DPOConfig(steps=2, batch_size=2, max_len=512), TrainerConfig(precision="fp32"), tok.pad_token_id)


KINDS = {"text demonstrations": (_text_demos, "DemoSFT"), "chat items": (_chat_items, "EncodedSFT"),
         "text pairs": (_text_pairs, "PairObjective"), "image tasks": (_image_sft, "DemoSFT"),
         "image pairs": (_image_pairs, "PairObjective")}


@pytest.mark.parametrize("kind", KINDS)
def test_every_data_kind_trains_each_step_through_the_one_loop(kind, monkeypatch, request):
    train, objective = KINDS[kind]
    seen = []
    one_step = SupervisedRun.step
    monkeypatch.setattr(SupervisedRun, "step", lambda run: seen.append(type(run.objective).__name__) or one_step(run))
    model, tok = copy.deepcopy(request.getfixturevalue("vlm")) if kind.startswith("image") else tiny()
    train(model, tok)
    assert seen == [objective, objective]


class RecordingRanks:
    """Rank 0's view of the rank group (session.step): records what would be broadcast."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    def step(self, name: str, payload: dict) -> dict:
        self.sent.append((name, payload))
        return {"loss": 1.0, "grad_norm": 0.0}


def test_the_sharded_trainer_ships_the_batches_and_learning_rates_the_local_one_trains_with():
    from posttrain.train.sft import EncodedSFT
    from posttrain.train.sharded.supervised import ShardedSupervisedTrainer

    model, tok = tiny()
    cfg, tcfg = SFTConfig(steps=4, batch_size=3, max_len=64, warmup_steps=2), TrainerConfig(precision="fp32")
    local_batches = []
    objective = EncodedSFT(sft_items(), cfg, tok.pad_token_id)
    local_loss = objective.loss
    objective.loss = lambda m, items, batch: local_batches.append(list(items)) or local_loss(m, items, batch)
    local = train_supervised(objective, LocalSupervisedTrainer(model, cfg.optim, cfg.steps, tcfg), cfg.steps, seed=5)
    ranks = RecordingRanks()
    sharded = train_supervised(EncodedSFT(sft_items(), cfg, tok.pad_token_id),
                               ShardedSupervisedTrainer(ranks, cfg.optim, cfg.steps, tcfg), cfg.steps, seed=5)
    assert [p["items"] for _, p in ranks.sent] == local_batches and {n for n, _ in ranks.sent} == {"supervised_step"}
    assert [r["lr"] for r in sharded] == pytest.approx([r["lr"] for r in local], rel=1e-12)
    assert [p["lr"] for _, p in ranks.sent[1:]] == pytest.approx([r["lr"] for r in local[:-1]], rel=1e-12)


def test_held_out_eval_runs_every_eval_every_steps_and_after_the_last():
    from posttrain.train.sft import EncodedSFT

    model, tok = tiny()
    cfg = SFTConfig(steps=5, batch_size=3, max_len=64)
    hist = train_supervised(EncodedSFT(sft_items(), cfg, tok.pad_token_id, evals=sft_items(4)),
                            LocalSupervisedTrainer(model, cfg.optim, cfg.steps), cfg.steps, eval_every=2)
    assert [i for i, row in enumerate(hist) if "eval/loss" in row] == [1, 3, 4]


def test_a_non_finite_loss_stops_the_run_naming_the_kind_the_step_and_the_examples():
    from posttrain.train.dpo import PairObjective
    from posttrain.train.update import NonFiniteLoss

    model, tok = tiny()
    pairs = dpo_pairs()
    ref = torch.full((len(pairs), 2), float("nan"))  # a corrupt reference: the loss is NaN on the first step
    cfg = DPOConfig(steps=3, batch_size=4, max_len=64)
    with pytest.raises(NonFiniteLoss, match=r"non-finite DPO loss at step 0, micro-batch 0 \(pairs \['p\d+'"):
        train_supervised(PairObjective(pairs, ref, cfg, tok.pad_token_id),
                         LocalSupervisedTrainer(model, cfg.optim, cfg.steps), cfg.steps)


def test_a_stop_hook_ends_the_run_after_that_step_with_the_model_in_eval_mode():
    from posttrain.train.sft import EncodedSFT

    model, tok = tiny()
    cfg = SFTConfig(steps=10, batch_size=3, max_len=64)
    hist = train_supervised(EncodedSFT(sft_items(), cfg, tok.pad_token_id), LocalSupervisedTrainer(
        model, cfg.optim, cfg.steps), cfg.steps, stop=lambda step, row: step == 1)
    assert len(hist) == 2 and not model.training


# The files that may differentiate a loss and step an optimizer: the one supervised loop, the RL
# update, the ranks' halves of both, and the vision tower's pixel pretraining (its own schedule,
# docs/training.md "Optimizer"; test_optim pins it).
STEPPERS = {"train/supervised.py", "train/update.py", "train/sharded/steps.py", "train/tower_pretrain.py"}


def test_no_second_supervised_loop_steps_an_optimizer_outside_the_loop_module():
    found = {str(f.relative_to(ROOT)) for f in ROOT.rglob("*.py")
             if re.search(r"\.backward\(|\bopt(imizer)?\.step\(\)|clip_grad_norm_?\(", f.read_text())}
    assert found - STEPPERS - {"parallel/wrap.py"} == set()  # wrap.py defines the sharded clip_grad_norm


def test_no_supervised_module_counts_its_own_steps():
    names = ["sft.py", "dpo.py", "vision_sft.py", "vision_dpo.py", "vision_base.py", "agent_sft.py", "sharded/loops.py",
             "sharded/supervised.py"]
    found = [n for n in names if re.search(r"for step in range\(|while .*steps", (ROOT / "train" / n).read_text())]
    assert found == []
