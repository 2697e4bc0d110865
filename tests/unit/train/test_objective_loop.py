"""Issue 38's objective choices through the RL loop (build_state -> train_rl: rollout on the real
engine, verification, zero-variance filtering, update) on the built-in tiny model.

The reward source is the untrained model's own lengths: arithmetic answers within 8 tokens, and
with `rl.overlong: soft_penalty` (cache 4) a group whose samples stop at different lengths gets
different rewards, while a group that all ran to the budget is dropped. So one step holds both
kept and dropped groups, which is what the loss normaliser is about.
"""

import asyncio
import copy

import pytest
import torch

from posttrain.config import load_config
from posttrain.verifiers.overlong import completion_tokens

BASE = ["seed=1", "rl.steps=1", "rl.prompts_per_step=8", "rl.group_size=8", "rl.max_new_tokens=8",
        "rl.checkpoint_every=0", "log.trackers=[]", "log.detect_every=0",
        "tasks.domains={arithmetic: {n_train: 40, n_eval: 4}}", "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=2"]
SOFT = ["rl.overlong.name=soft_penalty", "rl.overlong.args={cache: 4}"]


@pytest.fixture(scope="module")
def setup():
    from posttrain.models.tiny import build_tiny
    from posttrain.tasks.splits import make_splits

    torch.set_num_threads(1)
    cfg = load_config(None, BASE)
    model, tok = build_tiny(cfg.model.tiny, seed=0)
    return model, tok, make_splits(cfg).train


def one_step(tmp_path, setup, *overrides):
    """One RL step under BASE + overrides: (its metrics row, its stored trajectories)."""
    from posttrain.train.rl import build_state, train_rl

    model, tok, train = setup
    run_dir = tmp_path / "run" / "_".join(o.split("=")[-1] for o in overrides).replace("/", "")[:60]
    run_dir.mkdir(parents=True, exist_ok=True)
    st = build_state(load_config(None, [*BASE, *overrides]), run_dir, copy.deepcopy(model), tok, train, train[:2], None)
    asyncio.run(train_rl(st))
    st.store.flush()
    rows, trajs = st.metrics.read(), list(st.store.iter())
    st.metrics.close(), st.store.close()
    return rows[-1], trajs


def test_loss_normalisers_scale_the_same_gradient_by_their_denominators(tmp_path, setup):
    rows = {n: one_step(tmp_path, setup, *SOFT, f"rl.loss_norm={n}")[0]
            for n in ("kept_tokens", "all_tokens", "constant")}
    kept, every, const = rows["kept_tokens"], rows["all_tokens"], rows["constant"]
    assert 0 < kept["groups/dropped_frac"] < 1  # the step holds kept and dropped groups: the case that matters
    assert every["train/loss_denom"] > kept["train/loss_denom"]  # dropped groups' tokens count
    assert const["train/loss_denom"] == 8 * 8 * 8  # every sample x rl.max_new_tokens
    # same samples, same numerator: the (pre-clip) gradient norm is inversely proportional to the denominator
    g = {n: r["train/grad_norm"] * r["train/loss_denom"] for n, r in rows.items()}
    assert g["all_tokens"] == pytest.approx(g["kept_tokens"], rel=1e-4)
    assert g["constant"] == pytest.approx(g["kept_tokens"], rel=1e-4)
    assert every["train/grad_norm"] < kept["train/grad_norm"]


def test_gate_zeroes_truncated_samples_before_the_verifier(tmp_path, setup):
    _, trajs = one_step(tmp_path, setup)
    cut = [t for t in trajs if t.finish_reason == "length"]
    assert cut and all(t.reward == 0.0 and t.verify.details.get("rule") == "format" for t in cut)


def test_score_sends_truncated_samples_to_the_verifier(tmp_path, setup):
    _, trajs = one_step(tmp_path, setup, "rl.overlong.name=score")
    cut = [t for t in trajs if t.finish_reason == "length"]
    assert cut and all(t.verify.details.get("rule") != "format" for t in cut if "\n" not in t.completion_text.strip())


def test_soft_penalty_rewards_are_the_score_plus_daps_linear_penalty(tmp_path, setup):
    row, trajs = one_step(tmp_path, setup, *SOFT)
    assert any(completion_tokens(t) < 8 for t in trajs) and any(t.finish_reason == "length" for t in trajs)
    for t in trajs:
        want = t.verify.score - min(1.0, max(0, completion_tokens(t) - (8 - 4)) / 4)
        assert t.reward == pytest.approx(want), (completion_tokens(t), t.reward)
    assert row["reward/mean"] == pytest.approx(sum(t.reward for t in trajs) / len(trajs))


def test_micro_batches_share_the_minibatchs_denominator(tmp_path, setup):
    whole, _ = one_step(tmp_path, setup, *SOFT, "rl.loss_norm=all_tokens")
    micro, _ = one_step(tmp_path, setup, *SOFT, "rl.loss_norm=all_tokens", "rl.micro_tokens=24")
    assert (1 - whole["groups/dropped_frac"]) * 8 >= 2  # >= 2 kept groups: a group each is >= 2 micro-batches
    assert micro["train/loss_denom"] == whole["train/loss_denom"]
    assert micro["train/grad_norm"] == pytest.approx(whole["train/grad_norm"], rel=1e-4)
