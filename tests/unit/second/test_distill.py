"""On-policy distillation: the per-token advantage, the reverse KL going down, the tokenizer refusal."""

from __future__ import annotations

import asyncio

import pytest
import torch

from posttrain.config import RunConfig
from posttrain.config_check import check_config
from posttrain.errors import ConfigError
from posttrain.models import save_policy
from posttrain.models.tiny import build_tiny
from posttrain.registry import build
from posttrain.rollout import make_engine
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.single_turn import rollout_single_turn
from posttrain.train.batching import token_logprobs
from posttrain.train.distill import distill_advantages, train_distill
from posttrain.testing.cli_fork import run_cli


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    """The student's own initialisation with a sharpened output layer (logits x3), saved as an HF directory:
    the teacher, ~2 nats of reverse KL from the student at the first token. Far from the student (a seed-1
    model, or x30), the sampled per-token estimate is too noisy for a few steps to make progress."""
    model, tok = build_tiny(seed=0)
    with torch.no_grad():
        model.lm_head.weight.mul_(3.0)
    return str(save_policy(model, tok, tmp_path_factory.mktemp("t") / "teacher"))


@torch.no_grad()
def exact_reverse_kl(student, teacher, tok, prompts) -> float:
    """KL(p_S || p_T) of the next-token distributions at the end of each prompt, summed over the vocabulary."""
    from posttrain.rollout.prompting import encode_prompt

    out = []
    for t in prompts:
        ids = torch.tensor([encode_prompt(tok, t.prompt)])
        ls = torch.log_softmax(student(input_ids=ids).logits[0, -1].float(), -1)
        lt = torch.log_softmax(teacher(input_ids=ids).logits[0, -1].float(), -1)
        out.append(float((ls.exp() * (ls - lt)).sum()))
    return sum(out) / len(out)


def tasks(n=4):
    return build("arithmetic", kind="domain").generate(n, seed=0, difficulty=1.0)


def test_the_advantage_is_teacher_minus_student_logprob_on_each_sampled_token(teacher_dir):
    student, tok = build_tiny(seed=0)
    teacher, _ = build_tiny(seed=1)
    trajs = asyncio.run(rollout_single_turn(make_engine("hf", student, tok), tok, tasks(2),
                                            SamplingParams(max_new_tokens=6, n=2, seed=0)))
    adv = distill_advantages(trajs, teacher, tok.pad_token_id)  # [B, W]
    for b, t in enumerate(trajs):
        ids = torch.tensor([list(t.prompt_ids) + list(t.turns[0].token_ids)])
        with torch.no_grad():
            t_lp, _ = token_logprobs(teacher, ids, torch.ones_like(ids))  # [1, L-1]
        start = len(t.prompt_ids) - 1  # column j scores token j+1
        n = len(t.turns[0].token_ids)
        want = t_lp[0, start:start + n] - torch.tensor(t.turns[0].logprobs)
        assert torch.allclose(adv[b, start:start + n], want, atol=1e-5)
        assert adv[b, :start].abs().sum() == 0 and adv[b, start + n:].abs().sum() == 0


def test_the_teacher_reads_the_updates_layout_and_gives_the_same_advantages():
    from posttrain.config import RLConfig

    student, tok = build_tiny(seed=0)
    teacher, _ = build_tiny(seed=1)
    trajs = asyncio.run(rollout_single_turn(make_engine("hf", student, tok), tok, tasks(2),
                                            SamplingParams(max_new_tokens=6, n=3, seed=0)))
    padded = distill_advantages(trajs, teacher, tok.pad_token_id)  # one row per sample
    shared = distill_advantages(trajs, teacher, tok.pad_token_id, RLConfig())  # a group's prompt once
    assert torch.allclose(shared, padded, atol=1e-5), float((shared - padded).abs().max())


def test_a_short_distillation_run_lowers_the_reverse_kl(teacher_dir):
    from posttrain.models import load_policy

    torch.manual_seed(0)
    cfg = RunConfig.model_validate({"engine": {"name": "hf"}, "models": {"teacher": {"path": teacher_dir}},
                                    "rl": {"loss": "distill", "steps": 5, "prompts_per_step": 2, "group_size": 32,
                                           "optim": {"lr": 3e-3, "betas": [0.9, 0.999], "warmup": 0},
                                           "max_new_tokens": 2}})
    student, tok = build_tiny(seed=0)
    teacher, _ = load_policy(teacher_dir)
    ts = tasks(2)
    before = exact_reverse_kl(student, teacher, tok, ts)
    train_distill(cfg, ts, student, tok)
    after = exact_reverse_kl(student, teacher, tok, ts)
    assert after < 0.75 * before, (before, after)


def _other_tokenizer_dir(root):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    path = save_policy(*build_tiny(seed=2), root / "other")
    core = Tokenizer(models.WordLevel({f"w{i}": i for i in range(50)} | {"<eos>": 50}, unk_token="w0"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", pad_token="w0").save_pretrained(path)
    return str(path)


def test_a_teacher_with_another_tokenizer_is_refused_at_config_load_naming_both(tmp_path):
    other = _other_tokenizer_dir(tmp_path)
    cfg = RunConfig.model_validate({"models": {"teacher": {"path": other}}, "rl": {"loss": "distill"}})
    with pytest.raises(ConfigError, match=f"student tiny and teacher {other} differ"):
        check_config(cfg, needs=("rl",))


def test_a_teacher_behind_a_url_is_refused_for_distillation():
    cfg = RunConfig.model_validate({"models": {"teacher": {"url": "http://127.0.0.1:1/v1"}}, "rl": {"loss": "distill"}})
    with pytest.raises(ConfigError, match="models.teacher.path"):
        check_config(cfg, needs=("rl",))


def test_posttrain_rl_refuses_a_distill_loss_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    cfg = tmp_path / "d.yaml"
    cfg.write_text("name: d\nrl: {loss: distill}\nmodels: {teacher: {path: tiny}}\n")
    r = run_cli(["rl", str(cfg), "--out", str(tmp_path / "run")],
                       env={**os.environ}, timeout=120)
    assert r.returncode != 0 and "posttrain distill" in r.stderr + r.stdout
