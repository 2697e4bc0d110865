"""Exact resume: 4 uninterrupted RL steps == 2 steps, checkpoint, new process state, 2 more.

Compared bitwise on CPU (fp32, one thread): the loss, reward and grad-norm trajectories
and the final weights. Everything that feeds a step is restored from the checkpoint:
weights, AdamW moments, task-scheduler state, RNG states, step and weights version; the
engine's sampling seed is a pure function of (seed, step).
"""

import asyncio
import copy
import dataclasses

import pytest
import torch

from posttrain.config import load_config
from posttrain.registry import registry, verifier
from posttrain.types import Spec, VerifyResult


@verifier("test_digit_match", answer_format="line")
class DigitMatch:
    """Partial credit (oracle digits matched by position), so a barely trained policy has reward variance."""

    async def __call__(self, task, traj, ctx):
        text, want = traj.completion_text.strip(), task.oracle
        score = sum(a == b for a, b in zip(text, want)) / max(len(want), len(text), 1)
        return VerifyResult(score, score == 1.0)


def _OVERRIDES(steps):
    return [
        "seed=3", f"rl.steps={steps}", "rl.prompts_per_step=4", "rl.group_size=4", "rl.max_new_tokens=6",
        "rl.checkpoint_every=2", "rl.keep_checkpoints=4", "rl.lr=3e-3", "rl.loss=grpo",
        "tasks.domains={arithmetic: {n_train: 12, n_eval: 4}}", "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2",
    ]


def _cfg(steps):
    return load_config(None, _OVERRIDES(steps))


def _run(run_dir, steps, model, tok, train, resume=False):
    from posttrain.train.rl import build_state, train_rl

    run_dir.mkdir(parents=True, exist_ok=True)
    st = build_state(_cfg(steps), run_dir, copy.deepcopy(model), tok, train, train[:2], None, resume=resume)
    asyncio.run(train_rl(st))
    rows = st.metrics.read()
    st.metrics.close(), st.store.close()
    return rows, st.model


@pytest.fixture(scope="module")
def setup():
    from posttrain.models.tiny import build_tiny
    from posttrain.config import SFTConfig
    from posttrain.recipes.quickstart import make_splits
    from posttrain.train.sft import sft_train

    torch.set_num_threads(1)
    cfg = _cfg(4)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    train = [dataclasses.replace(t, verifier=Spec("test_digit_match")) for t in make_splits(cfg).train]
    # a short SFT warm-up teaches the end-of-turn token, so samples pass the format rule
    sft_train(model, tok, [(t.prompt, t.oracle) for t in train], SFTConfig(steps=40, batch_size=12, lr=1e-2))
    return model, tok, train


@pytest.mark.slow
def test_resume_reproduces_uninterrupted_run_bitwise(tmp_path, setup):
    model, tok, train = setup
    full, m_full = _run(tmp_path / "a", 4, model, tok, train)
    first, _ = _run(tmp_path / "b", 2, model, tok, train)
    assert [r["step"] for r in first] == [0, 1]
    resumed, m_res = _run(tmp_path / "b", 4, model, tok, train, resume=True)
    assert [r["step"] for r in resumed] == [0, 1, 2, 3]
    keys = ("train/loss", "train/grad_norm", "reward/mean", "completion_tokens/mean", "weights_version")
    for k in keys:
        assert [r.get(k) for r in full] == [r.get(k) for r in resumed], k
    assert any(r.get("train/grad_norm", 0.0) > 0.0 for r in full)  # the comparison is not vacuous
    for (n, a), (_, b) in zip(m_full.state_dict().items(), m_res.state_dict().items()):
        assert torch.equal(a, b), n


_CALLS = []


@registry("loss").register("test_nan_on_third_update", units="sequences")
def _nan_loss(logp, old_logp, adv, mask, **kw):
    _CALLS.append(1)
    loss, st = registry("loss").get("grpo")(logp, old_logp, adv, mask, **kw)
    return (loss * float("nan") if len(_CALLS) == 3 else loss), st


@pytest.mark.slow
def test_nan_loss_stops_with_last_good_checkpoint_and_names_step_and_batch(tmp_path, setup):
    from posttrain.train.checkpoint import list_checkpoints
    from posttrain.train.rl import build_state, train_rl
    from posttrain.train.update import NonFiniteLoss

    model, tok, train = setup
    cfg = load_config(None, [*_OVERRIDES(4), "rl.loss=test_nan_on_third_update", "rl.checkpoint_every=1"])
    st = build_state(cfg, tmp_path, copy.deepcopy(model), tok, train, train[:2], None)
    _CALLS.clear()
    with pytest.raises(NonFiniteLoss, match=r"RL step 2: non-finite loss nan on minibatch 0 .*step-1"):
        asyncio.run(train_rl(st))
    assert list_checkpoints(tmp_path) == [0, 1]  # nothing written from the poisoned step
    assert [r["step"] for r in st.metrics.read()] == [0, 1]
    st.metrics.close(), st.store.close()


def _lora_overrides(steps):
    return [*_OVERRIDES(steps), "trainer.lora={r: 4, alpha: 8, dropout: 0.0, target_modules: [q_proj, v_proj]}"]


@pytest.mark.slow
def test_lora_rl_trains_only_the_adapter_and_resumes_bitwise(tmp_path, setup):
    pytest.importorskip("peft")  # in the dev extra; skipped only where someone installed without it
    from posttrain.train.rl import build_state, train_rl
    from posttrain.train.rl_model import plain_state

    model, tok, train = setup

    def run(run_dir, steps, resume=False):
        run_dir.mkdir(parents=True, exist_ok=True)
        st = build_state(load_config(None, _lora_overrides(steps)), run_dir, copy.deepcopy(model), tok, train,
                         train[:2], None, resume=resume)
        asyncio.run(train_rl(st))
        rows = st.metrics.read()
        st.metrics.close(), st.store.close()
        return rows, st

    full, st_full = run(tmp_path / "a", 4)
    run(tmp_path / "b", 2)
    resumed, st_res = run(tmp_path / "b", 4, resume=True)
    for k in ("train/loss", "train/grad_norm", "reward/mean"):
        assert [r.get(k) for r in full] == [r.get(k) for r in resumed], k
    merged = plain_state(st_full.model)
    assert all(torch.equal(a, b) for a, b in zip(merged.values(), plain_state(st_res.model).values()))
    base = model.state_dict()
    changed = [k for k in base if not torch.equal(base[k], merged[k])]
    assert changed and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in changed)  # only adapted layers
    # the engine generates with the merged weights, and the checkpoint is a plain HF model of them
    from posttrain.models import load_policy
    from posttrain.train.checkpoint import latest_checkpoint

    ck, _ = load_policy(latest_checkpoint(tmp_path / "a"))
    assert all(torch.allclose(ck.state_dict()[k], merged[k], atol=1e-6) for k in merged)


@pytest.mark.slow
def test_gradient_checkpointing_in_rl_gives_the_same_steps(tmp_path, setup):
    from posttrain.train.rl import build_state, train_rl

    model, tok, train = setup

    def rows(run_dir, extra):
        run_dir.mkdir(parents=True, exist_ok=True)
        st = build_state(load_config(None, [*_OVERRIDES(2), *extra]), run_dir, copy.deepcopy(model), tok, train,
                         train[:2], None)
        asyncio.run(train_rl(st))
        out = st.metrics.read()
        st.metrics.close(), st.store.close()
        return out

    plain = rows(tmp_path / "a", [])
    ckpt = rows(tmp_path / "b", ["trainer.gradient_checkpointing=true"])
    for k in ("train/loss", "reward/mean"):
        assert [r[k] for r in plain] == pytest.approx([r[k] for r in ckpt], abs=1e-6), k
